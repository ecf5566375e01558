#!/usr/bin/env node
// The web console's static files next to its compiled scripts (`tsc -p console/tsconfig.json`
// writes dist/console-ui/js/): index.html, the stylesheets and the icon, copied as they are.
import { copyFileSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

const REPO = resolve(import.meta.dirname, "..");
const OUT = join(REPO, "dist", "console-ui");
mkdirSync(OUT, { recursive: true });
for (const file of ["index.html", "base.css", "views.css", "icon.svg"]) {
  copyFileSync(join(REPO, "console", file), join(OUT, file));
}
