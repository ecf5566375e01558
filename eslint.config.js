// @ts-check
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "coverage/", "data/", "generated-images/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-console": ["error", { allow: ["error"] }],
      // Small pieces: no file over 400 lines.
      "max-lines": ["error", { max: 400 }],
    },
  },
  {
    // A closure past 80 lines is several named functions (tests' describe blocks excepted).
    files: ["src/**", "console/src/**"],
    rules: {
      "max-lines-per-function": [
        "error",
        { max: 80, skipBlankLines: true, skipComments: true, IIFEs: true },
      ],
    },
  },
  {
    files: ["test/**", "bench/**", "src/cli.ts", "src/main.ts"],
    rules: { "no-console": "off" },
  },
  {
    // The web console runs in the browser: its globals, not Node's.
    files: ["console/**"],
    languageOptions: { globals: { ...globals.browser } },
  },
);
