// Bundles src/lib.ts (the pure modules) to bench/.build/lib.mjs for Node (bench and tests).
import { build } from 'vite';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export async function buildLib() {
  await build({
    root,
    configFile: false,
    logLevel: 'silent',
    build: {
      outDir: join(root, 'bench/.build'),
      emptyOutDir: true,
      minify: false,
      lib: { entry: join(root, 'src/lib.ts'), formats: ['es'], fileName: () => 'lib.mjs' },
    },
  });
  return join(root, 'bench/.build/lib.mjs');
}
