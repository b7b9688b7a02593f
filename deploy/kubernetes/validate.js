#!/usr/bin/env node
/*
 * validate.js - validates rendered Kubernetes manifests (YAML on stdin or in
 * the files named) against the Kubernetes schemas of the npm package
 * kubernetes-models, then checks the hardening this project promises for
 * every container: probes (lockd), resources, non-root, read-only root
 * filesystem, no privilege escalation, all capabilities dropped.
 *
 *   kubectl kustomize deploy/kubernetes/overlays/sidecar | node deploy/kubernetes/validate.js
 *
 * Exits 1 and prints one line per problem; prints "N objects valid" on success.
 */
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require('yaml');

function groupDir(apiVersion) {
    // "v1" -> core "v1"; "apps/v1" -> "apps/v1"; kubernetes-models lays files out so.
    return apiVersion;
}

function modelFor(apiVersion, kind) {
    const file = path.join('kubernetes-models', groupDir(apiVersion), kind);
    try {
        const mod = require(file);
        return mod[kind] || mod.default;
    } catch (e) {
        return null;
    }
}

const problems = [];
function problem(where, msg) {
    problems.push(`${where}: ${msg}`);
}

function checkContainer(where, c, isLockd) {
    const sc = c.securityContext || {};
    if (!c.resources || !c.resources.requests || !c.resources.limits)
        problem(where, 'resources.requests and resources.limits are required');
    if (sc.allowPrivilegeEscalation !== false)
        problem(where, 'securityContext.allowPrivilegeEscalation must be false');
    if (sc.readOnlyRootFilesystem !== true)
        problem(where, 'securityContext.readOnlyRootFilesystem must be true');
    const drop = (sc.capabilities && sc.capabilities.drop) || [];
    if (!drop.includes('ALL'))
        problem(where, 'securityContext.capabilities.drop must include ALL');
    if (isLockd) {
        const live = c.livenessProbe && c.livenessProbe.httpGet;
        const ready = c.readinessProbe && c.readinessProbe.httpGet;
        if (!live || live.path !== '/healthz')
            problem(where, 'livenessProbe must GET /healthz');
        if (!ready || ready.path !== '/readyz')
            problem(where, 'readinessProbe must GET /readyz');
    }
}

function checkPodSpec(where, spec, annotations) {
    const podSc = spec.securityContext || {};
    const all = [...(spec.initContainers || []), ...(spec.containers || [])];
    let lockd = 0;
    for (const c of all) {
        const isLockd = /(^|\/)lockd(:|$)/.test(c.image || '') && !(c.command || []).length;
        if (isLockd) lockd++;
        const sc = c.securityContext || {};
        if (sc.runAsNonRoot !== true && podSc.runAsNonRoot !== true)
            problem(`${where} container ${c.name}`, 'runAsNonRoot must be true');
        checkContainer(`${where} container ${c.name}`, c, isLockd);
    }
    if (lockd > 0) {
        if (spec.terminationGracePeriodSeconds === undefined || spec.terminationGracePeriodSeconds < 26)
            problem(where, 'terminationGracePeriodSeconds must exceed shutdown_timeout_ms (25 s)');
        if (!annotations || annotations['prometheus.io/scrape'] !== 'true' || !annotations['prometheus.io/port'])
            problem(where, 'prometheus.io/scrape and prometheus.io/port annotations are required');
    }
}

function main() {
    const inputs = process.argv.length > 2
        ? process.argv.slice(2).map((f) => [f, fs.readFileSync(f, 'utf8')])
        : [['<stdin>', fs.readFileSync(0, 'utf8')]];
    let count = 0;
    for (const [name, text] of inputs) {
        for (const doc of YAML.parseAllDocuments(text)) {
            if (doc.errors.length) {
                problem(name, doc.errors.map((e) => e.message).join('; '));
                continue;
            }
            const obj = doc.toJS();
            if (obj === null || obj === undefined) continue;
            count++;
            const where = `${name}: ${obj.kind}/${obj.metadata && obj.metadata.name}`;
            const Model = modelFor(obj.apiVersion, obj.kind);
            if (!Model) {
                problem(where, `no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
                continue;
            }
            try {
                new Model(obj).validate();
            } catch (e) {
                problem(where, `schema: ${e.message}`);
            }
            const tpl = obj.spec && obj.spec.template;
            if (tpl && tpl.spec)
                checkPodSpec(where, tpl.spec, tpl.metadata && tpl.metadata.annotations);
            else if (obj.kind === 'Pod')
                checkPodSpec(where, obj.spec, obj.metadata.annotations);
        }
    }
    if (count === 0) problem('input', 'no Kubernetes objects found');
    for (const p of problems) console.log(p);
    if (problems.length) process.exit(1);
    console.log(`${count} objects valid`);
}

main();
