import { defineConfig } from 'vite';

// Relative asset URLs, so the bundle works from `graphmind serve` at any path and from
// GRAPHMIND_VIEWER_DIST. No CDN: everything is bundled from node_modules.
export default defineConfig({
  base: './',
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 400 },
  server: { proxy: { '/api': 'http://127.0.0.1:4747', '/ws': { target: 'ws://127.0.0.1:4747', ws: true } } },
});
