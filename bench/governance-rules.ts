/**
 * The governance phase's three CEL rules (issue 44 part 1): one reads the arguments, one
 * `jwt.groups`, and the last allows the rest. Apart from bench/governance.ts, which starts
 * processes, so bench/micro-cases.ts can count them in a bundle of their own.
 */
export const GOVERNANCE_RULES = [
  { name: 'no-long-echo', effect: 'deny', when: 'mcp.tool.name == "echo" && size(mcp.tool.arguments.message) > 1000' },
  { name: 'bench-group-only', effect: 'deny', when: '!("bench" in jwt.groups)' },
  { name: 'allow-rest', effect: 'allow', when: 'true' },
];
