/**
 * A configuration that cannot be used. `problems` holds one line per problem,
 * each naming the field (`channels[0].baseUrl: must be a URL`), so the CLI can
 * print them and exit 2.
 */
export class ConfigError extends Error {
  readonly problems: string[];

  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}
