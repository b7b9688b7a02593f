#!/usr/bin/env node
/*
 * openapi_check.js - validates lockd's real answers against openapi.yaml.
 * Reads JSON lines {"path": "/locks/{name}", "method": "post", "status": 200,
 * "body": {...}} on stdin; for each, finds that operation's response for the
 * status and validates the body against its application/json schema (JSON
 * Schema 2020-12, as OpenAPI 3.1 uses) and looks for fields the schema does
 * not declare (where it allows any). Prints one line per answer checked,
 * exits 1 if any does not conform, carries an undeclared field or is
 * undocumented.
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

const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');
let bad = 0;

/* Fields an answer carries that its schema does not declare (a schema that
 * allows any other property still conforms, so a field the server sends and
 * the spec dropped would go unseen): paths of the undeclared keys. */
const deref = (s) => (s && s.$ref ? deref(s.$ref.split('/').slice(1).reduce((o, k) => o[k], doc)) : s);
function branches(s) {
    s = deref(s);
    if (!s || typeof s !== 'object') return [];
    return [s, ...['allOf', 'anyOf', 'oneOf'].flatMap((k) => (s[k] || []).flatMap(branches))];
}
function undeclared(schema, value, where, out) {
    const bs = branches(schema);
    if (Array.isArray(value)) {
        const items = bs.map((b) => b.items).find((i) => i);
        if (items) value.forEach((v, i) => undeclared(items, v, `${where}[${i}]`, out));
        return out;
    }
    if (!value || typeof value !== 'object') return out;
    const props = bs.filter((b) => b.properties);
    if (props.length === 0 || bs.some((b) => b.additionalProperties === true)) return out;
    for (const [k, v] of Object.entries(value)) {
        const b = props.find((p) => k in p.properties);
        if (b) undeclared(b.properties[k], v, `${where}.${k}`, out);
        else out.push(`${where}.${k}`);
    }
    return out;
}
for (const line of fs.readFileSync(0, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const c = JSON.parse(line);
    const where = `${c.method.toUpperCase()} ${c.path} ${c.status}`;
    const op = doc.paths[c.path] && doc.paths[c.path][c.method];
    let resp = op && op.responses[String(c.status)];
    let ptr = `#/paths/${esc(c.path)}/${c.method}/responses/${c.status}`;
    if (resp && resp.$ref) {
        ptr = resp.$ref;
        resp = resp.$ref.split('/').slice(1).reduce((o, k) => o[k], doc);
    }
    const media = resp && resp.content && resp.content['application/json'];
    if (!media) {
        console.log(`not documented: ${where}`);
        bad++;
        continue;
    }
    const validate = ajv.compile({ $ref: `openapi.json${ptr}/content/application~1json/schema` });
    const extra = validate(c.body) ? undeclared(resp.content['application/json'].schema, c.body, 'body', []) : null;
    if (extra && extra.length) {
        console.log(`sends fields openapi.yaml does not declare: ${where}: ${extra.join(', ')}\n  body: ${JSON.stringify(c.body)}`);
        bad++;
    } else if (extra) {
        console.log(`conforms: ${where}`);
    } else {
        console.log(`does not conform: ${where}: ${ajv.errorsText(validate.errors)}\n  body: ${JSON.stringify(c.body)}`);
        bad++;
    }
}
process.exit(bad ? 1 : 0);
