import { z } from "zod";
import { fromText } from "./field-types.js";

/** The web console at `/console/`. */
export const consoleSchema = z
  .object({
    enabled: fromText(z.boolean({ error: "must be true or false" }))
      .default(true)
      .meta({
        description:
          "Serve the web console at `/console/`, where a person signs in with their own API " +
          "key to make images, watch them being made and find them again. It uses the public " +
          "API only: it opens nothing a key could not reach with curl. `false`: `/console/` " +
          "answers `404 not_found`.",
      }),
  })
  .strict()
  .prefault({})
  .meta({
    description:
      "The web console at `/console/`: generate, edit, watch and browse image tasks in a browser.",
  });
