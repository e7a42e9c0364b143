'use strict';
// `npm install` builds the addon: cargo builds the napi crate, and the shared library is
// copied next to index.js under its napi-rs name (graphmind.linux-x64-gnu.node, see native.js). GRAPHMIND_NODE_PROFILE=debug for a debug build.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const root = path.resolve(here, '..', '..');
const profile = process.env.GRAPHMIND_NODE_PROFILE === 'debug' ? 'debug' : 'release';
const cargo = process.env.CARGO || 'cargo';
const args = ['build', '-p', 'graphmind-node', '--manifest-path', path.join(root, 'Cargo.toml')];
if (profile === 'release') args.push('--release');
execFileSync(cargo, args, { stdio: 'inherit' });

const targetDir = process.env.CARGO_TARGET_DIR
  ? path.resolve(root, process.env.CARGO_TARGET_DIR)
  : path.join(root, 'target');
const names = { linux: 'libgraphmind_node.so', darwin: 'libgraphmind_node.dylib', win32: 'graphmind_node.dll' };
const lib = path.join(targetDir, profile, names[process.platform] || names.linux);
const { platformTriple } = require('../native.js');
const out = path.join(here, `graphmind.${platformTriple()}.node`);
// Copy to a temporary name and rename, so a running process never maps a half-written file.
fs.copyFileSync(lib, out + '.tmp');
fs.renameSync(out + '.tmp', out);
console.log(`graphmind: built ${path.relative(process.cwd(), out)} (${profile})`);
