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
