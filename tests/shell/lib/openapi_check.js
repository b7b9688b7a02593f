#!/usr/bin/env node
/*
 * openapi_check.js - validates lockd's real answers against openapi.yaml.
 * Reads JSON lines {"path": "/locks/{name}", "method": "post", "status": 200,
 * "body": {...}} on stdin; for each, finds that operation's response for the
 * status and validates the body against its application/json schema (JSON
 * Schema 2020-12, as OpenAPI 3.1 uses). Prints one line per answer checked,
 * exits 1 if any does not conform or is undocumented.
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
    if (validate(c.body)) {
        console.log(`conforms: ${where}`);
    } else {
        console.log(`does not conform: ${where}: ${ajv.errorsText(validate.errors)}\n  body: ${JSON.stringify(c.body)}`);
        bad++;
    }
}
process.exit(bad ? 1 : 0);
