// The console's build: `npm run build` (what `make console` runs) writes dist/, which the gateway
// serves at / (http.console_dir). JSX is compiled by Vite's own transform (React's automatic
// runtime), so no React plugin is needed.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    rolldownOptions: {
      // swr (inside @ai-sdk/react) marks its modules 'use client', which means nothing here.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
  oxc: {
    jsx: { runtime: 'automatic' },
  },
});
