import { defineConfig } from "vite";

// The bundle is embedded in the Go binary and served under [server].admin_path,
// which is only known at run time. So every URL in the build is relative
// (base "./"), and the Go handler writes the real path into index.html's
// <base href>. File names carry a content hash and nothing else varies between
// builds, so `task check-generated` can rebuild and compare byte for byte.
export default defineConfig({
  base: "./",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    // One small app: a single JS and a single CSS file load faster than
    // a waterfall of chunks, and keep the embedded file list short.
    modulePreload: { polyfill: false },
    cssCodeSplit: false,
    reportCompressedSize: false,
    target: "es2022",
  },
  server: {
    // `npm run dev` against a paymentd on the default port: the API lives
    // at the server root, the app under /admin/.
    proxy: {
      "^/billing\\.": "http://127.0.0.1:50051",
    },
  },
});
