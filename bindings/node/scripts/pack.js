'use strict';
// `make dist`: the npm tarball of @graphmind/node, prebuilt, and the per-platform package. Stages the package with the
// addon as graphmind.<triple>.node and the server as server/<triple>/graphmind, a
// package.json without the build-from-source `install` script or dev dependencies (so
// installing it runs no cargo and no script), then `npm pack`s it.
//   node scripts/pack.js --addon <libgraphmind_node.so> --server <graphmind> --out <dir>
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { platformTriple } = require('../native.js');

const here = path.resolve(__dirname, '..');
const root = path.resolve(here, '..', '..');
/**
 * The JavaScript and type files the package ships, as they are in bindings/node: the
 * development package.json's `files`, less the build-from-source script and the addon.
 */
const SOURCES = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'))
  .files.filter((file) => file !== 'scripts/build.js' && !file.endsWith('.node'));

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || !process.argv[i + 1]) throw new Error(`pack.js: --${name} is required`);
  return path.resolve(process.argv[i + 1]);
}

const addon = arg('addon');
const server = arg('server');
const out = arg('out');
const triple = platformTriple();
const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'graphmind-npm-'));
const platformStage = path.join(stage, 'platform-package');
try {
  for (const rel of SOURCES) {
    fs.mkdirSync(path.dirname(path.join(stage, rel)), { recursive: true });
    fs.copyFileSync(path.join(here, rel), path.join(stage, rel));
  }
  fs.chmodSync(path.join(stage, 'bin/graphmind.js'), 0o755);
  fs.copyFileSync(addon, path.join(stage, `graphmind.${triple}.node`));
  fs.mkdirSync(path.join(stage, 'server', triple), { recursive: true });
  fs.copyFileSync(server, path.join(stage, 'server', triple, 'graphmind'));
  fs.chmodSync(path.join(stage, 'server', triple, 'graphmind'), 0o755);
  fs.copyFileSync(path.join(root, 'docs', 'node.md'), path.join(stage, 'README.md'));
  const dev = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8'));

  const pkg = {
    name: dev.name,
    version: dev.version,
    description: dev.description,
    main: dev.main,
    types: dev.types,
    exports: dev.exports,
    bin: { graphmind: 'bin/graphmind.js' },
    license: dev.license,
    engines: dev.engines,
    os: ['linux'],
    cpu: ['x64'],
    files: [...SOURCES, `graphmind.${triple}.node`, `server/${triple}/graphmind`, 'README.md'],
    peerDependencies: dev.peerDependencies,
    peerDependenciesMeta: dev.peerDependenciesMeta,
  };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.mkdirSync(out, { recursive: true });
  console.log(npmPack(stage, out));

  // The per-platform package native.js falls back to (napi-rs's `@scope/pkg-<triple>`): the
  // addon as its `main` and the server beside it. Not listed in the main package's
  // optionalDependencies while neither is published (npm would look it up in the registry).
  fs.mkdirSync(platformStage);
  fs.copyFileSync(addon, path.join(platformStage, `graphmind.${triple}.node`));
  fs.copyFileSync(server, path.join(platformStage, 'graphmind'));
  fs.chmodSync(path.join(platformStage, 'graphmind'), 0o755);
  const platformPkg = {
    name: `@graphmind/node-${triple}`,
    version: dev.version,
    description: `The prebuilt addon and server of ${dev.name} for ${triple}`,
    main: `graphmind.${triple}.node`,
    license: dev.license,
    engines: dev.engines,
    os: ['linux'],
    cpu: ['x64'],
    files: [`graphmind.${triple}.node`, 'graphmind'],
  };
  fs.writeFileSync(path.join(platformStage, 'package.json'), `${JSON.stringify(platformPkg, null, 2)}\n`);
  console.log(npmPack(platformStage, out));
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}

/** `npm pack`s `dir` into `out`; returns the tarball's path. */
function npmPack(dir, out) {
  const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: dir, encoding: 'utf8' }).trim();
  return path.join(out, name.split('\n').pop());
}
