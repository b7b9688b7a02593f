#!/usr/bin/env node
/*
 * openapi_examples.js - every example in openapi.yaml is true: each media
 * example validates against its media schema, each schema's `examples`
 * against that schema, and each error example's `message` is one lockd
 * really sends - a default message of api/errors.c's table, or a message
 * api/ formats (printf formats of api/*.c, %s/%d/... matching any text).
 * Prints one line per example, exits 1 if any is wrong.
 */
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const Ajv2020 = require('ajv/dist/2020').default;

const repo = process.argv[2];
const doc = YAML.parse(fs.readFileSync(path.join(repo, 'openapi.yaml'), 'utf8'));
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
ajv.addSchema(doc, 'openapi.json');

/* The messages lockd sends: C string literals of api/*.c that look like a
 * sentence (the table's third column, api_error_set / snprintf formats). */
const exact = new Set();
const patterns = [];
const unC = (s) => s.replace(/\\"/g, '"').replace(/\\\\/g, '\\');
for (const f of fs.readdirSync(path.join(repo, 'api')).filter((f) => f.endsWith('.c'))) {
    const src = fs.readFileSync(path.join(repo, 'api', f), 'utf8')
        .replace(/"\s*\n\s*"/g, ''); /* join "a" "b" across lines */
    for (const m of src.matchAll(/"((?:[^"\\\n]|\\.)*)"/g)) {
        const s = unC(m[1]);
        if (!/ /.test(s)) continue;
        if (/%/.test(s)) {
            const re = s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
                .replace(/%(\\\.)?[-0-9.*]*(ll|l|z)?[sdufgx]/g, '.+');
            patterns.push(new RegExp('^' + re + '$'));
        } else {
            exact.add(s);
        }
    }
}
const sent = (msg) => exact.has(msg) || patterns.some((re) => re.test(msg));

const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');
let bad = 0, n = 0;
function check(ptr, schemaPtr, value, where) {
    n++;
    const validate = ajv.compile({ $ref: `openapi.json#${schemaPtr}` });
    if (!validate(value)) {
        console.log(`example does not conform: ${where}: ${ajv.errorsText(validate.errors)}`);
        bad++;
        return;
    }
    if (value && typeof value === 'object' && typeof value.error === 'string') {
        if (typeof value.message !== 'string' || !sent(value.message)) {
            console.log(`error example's message is not one lockd sends: ${where}: ${JSON.stringify(value.message)}`);
            bad++;
            return;
        }
    }
    console.log(`example ok: ${where}`);
}

/* Walks the document: media objects (content/<type>) and schemas. */
function walk(node, ptr) {
    if (!node || typeof node !== 'object') return;
    if (ptr.match(/\/content\/[^/]+$/) && node.schema) {
        if ('example' in node) check(ptr, `${ptr}/schema`, node.example, `${ptr}/example`);
        for (const [k, ex] of Object.entries(node.examples || {}))
            check(ptr, `${ptr}/schema`, ex.value, `${ptr}/examples/${k}`);
    }
    if (ptr.match(/\/(schemas\/[^/]+|properties\/[^/]+)$/) && Array.isArray(node.examples))
        node.examples.forEach((ex, i) => check(ptr, ptr, ex, `${ptr}/examples/${i}`));
    if (ptr.match(/\/parameters\/[^/]+$/) && 'example' in node && node.schema)
        check(ptr, `${ptr}/schema`, node.example, `${ptr}/example`);
    for (const [k, v] of Object.entries(node)) walk(v, `${ptr}/${esc(k)}`);
}
walk(doc, '');
console.log(`${n} examples checked, ${bad} wrong`);
process.exit(bad || n === 0 ? 1 : 0);
