'use strict';
/**
 * Finds the prebuilt parts of @graphmind/node for this platform, in the convention of
 * napi-rs: the addon is `graphmind.<triple>.node` (for example `graphmind.linux-x64-gnu.node`)
 * next to this file, or the `main` of the optional per-platform package
 * `@graphmind/node-<triple>`; the server is `server/<triple>/graphmind` next to this file, or
 * `graphmind` in that platform package. Nothing is compiled when the package is installed.
 * When no file fits, the error names every file and package it looked for.
 */
const fs = require('node:fs');
const path = require('node:path');

/** The addon's base name (`graphmind.<triple>.node`). */
const ADDON_NAME = 'graphmind';
/** The per-platform packages are `<PLATFORM_PACKAGE_PREFIX><triple>`. */
const PLATFORM_PACKAGE_PREFIX = '@graphmind/node-';
/** Overrides the addon file (an absolute path), for a build of one's own. */
const ADDON_ENV = 'GRAPHMIND_NODE_ADDON';
/** Overrides the server binary (an absolute path). */
const SERVER_ENV = 'GRAPHMIND_SERVER_BIN';

/** Whether this Linux runs on musl rather than glibc (as napi-rs decides it). */
function isMusl() {
  try {
    const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null;
    if (report && report.header) return !report.header.glibcVersionRuntime;
  } catch { /* fall through */ }
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    return false;
  }
}

/**
 * The napi-rs platform triple: `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`,
 * `win32-x64-msvc`, ... (`null` for a platform napi-rs has no name for).
 */
function platformTriple(platform = process.platform, arch = process.arch, musl = platform === 'linux' && isMusl()) {
  switch (platform) {
    case 'linux': return `linux-${arch}-${musl ? 'musl' : 'gnu'}`;
    case 'win32': return `win32-${arch}-msvc`;
    case 'darwin': case 'freebsd': case 'android': return `${platform}-${arch}`;
    default: return null;
  }
}

/** Where the addon may be for `triple`, in the order they are tried. */
function addonCandidates(triple, dir = __dirname) {
  const file = `${ADDON_NAME}.${triple}.node`;
  return { file: path.join(dir, file), pkg: `${PLATFORM_PACKAGE_PREFIX}${triple}` };
}

function isNotFound(error, what) {
  return error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes(what);
}

/**
 * Loads the addon: `$GRAPHMIND_NODE_ADDON` when set, else the file next to this module,
 * else the per-platform package. Throws an error naming what it looked for when none fits.
 */
function loadAddon({ dir = __dirname, triple = platformTriple(), env = process.env } = {}) {
  if (env[ADDON_ENV]) return require(path.resolve(env[ADDON_ENV]));
  const tried = [];
  if (triple) {
    const { file, pkg } = addonCandidates(triple, dir);
    if (fs.existsSync(file)) return require(file);
    tried.push(file);
    try {
      return require(pkg);
    } catch (error) {
      if (!isNotFound(error, pkg)) throw error;
      tried.push(`the package ${pkg}`);
    }
  }
  throw new Error(
    `@graphmind/node: no prebuilt addon for this platform (${process.platform}-${process.arch}` +
    `${triple ? `, napi triple ${triple}` : ', which has no napi-rs name'}). Looked for: ` +
    `${tried.length ? tried.join(', ') : 'nothing'}. Install the package for this platform, ` +
    `or build one from a checkout (bindings/node: npm install) and set ${ADDON_ENV} to it.`);
}

/**
 * The path of the bundled `graphmind` server: `$GRAPHMIND_SERVER_BIN` when set, else
 * `server/<triple>/graphmind` next to this module, else `graphmind` in the per-platform
 * package. Throws an error naming what it looked for when none is there.
 */
function serverPath({ dir = __dirname, triple = platformTriple(), env = process.env } = {}) {
  if (env[SERVER_ENV]) return path.resolve(env[SERVER_ENV]);
  const exe = process.platform === 'win32' ? 'graphmind.exe' : 'graphmind';
  const tried = [];
  if (triple) {
    const local = path.join(dir, 'server', triple, exe);
    if (fs.existsSync(local)) return local;
    tried.push(local);
    const pkg = `${PLATFORM_PACKAGE_PREFIX}${triple}`;
    try {
      const inPkg = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), exe);
      if (fs.existsSync(inPkg)) return inPkg;
      tried.push(inPkg);
    } catch {
      tried.push(`the package ${pkg}`);
    }
  }
  throw new Error(
    `@graphmind/node: no bundled graphmind server for ${process.platform}-${process.arch}. ` +
    `Looked for: ${tried.length ? tried.join(', ') : 'nothing'}. Set ${SERVER_ENV} to a graphmind ` +
    'binary (cargo install graphmind-cli, or the one in the pip wheel or the C tarball).');
}

module.exports = { loadAddon, serverPath, platformTriple, addonCandidates, ADDON_ENV, SERVER_ENV };
