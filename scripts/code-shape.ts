/**
 * The size rules of docs/architecture.md and STYLE.md, checked (issue 14): no source file
 * over 400 lines and no function over 80 — one concern per file, one step per function, so
 * a reader can hold either in mind. Functions are found with the TypeScript compiler API,
 * so every kind counts: declarations, methods, constructors, accessors, function
 * expressions and arrow functions (a route handler passed inline is measured on its own,
 * and also inside the function that holds it).
 *
 *   node --import tsx scripts/code-shape.ts [--src <dir>]   (npm run check:shape)
 *
 * Prints each offender and exits 1 if there is any. A function's length runs from its first
 * token (after its JSDoc) to its closing brace, both lines included; a file's length is its
 * number of lines as an editor shows them.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { listSourceFiles } from './folder-graph.js';

export const MAX_FILE_LINES = 400;
export const MAX_FUNCTION_LINES = 80;

export interface LongFile {
  file: string;
  lines: number;
}

export interface LongFunction {
  file: string;
  /** 1-based line where the function starts. */
  line: number;
  name: string;
  lines: number;
}

export interface ShapeLimits {
  maxFileLines: number;
  maxFunctionLines: number;
}

export interface ShapeReport {
  limits: ShapeLimits;
  files: LongFile[];
  functions: LongFunction[];
}

const DEFAULT_LIMITS: ShapeLimits = { maxFileLines: MAX_FILE_LINES, maxFunctionLines: MAX_FUNCTION_LINES };

/** Lines as an editor counts them: a final newline does not start another line. */
export function lineCount(text: string): number {
  if (text === '') return 0;
  const breaks = text.split('\n').length;
  return text.endsWith('\n') ? breaks - 1 : breaks;
}

function nameOfNode(node: ts.Node | undefined): string | undefined {
  if (!node) return undefined;
  const name = (node as { name?: ts.Node }).name;
  if (name && (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name))) return name.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  return undefined;
}

/**
 * A name a reader can find: the function's own, else the variable or property it is
 * assigned to, else `(anonymous)` with the call it is passed to (`app.get(…)` handlers).
 */
function describeFunction(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  const own = nameOfNode(node);
  if (own) return ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) ? methodName(node, own) : own;
  const parent = node.parent;
  const assigned = ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent) ? nameOfNode(parent) : undefined;
  if (assigned) return assigned;
  if (ts.isCallExpression(parent)) return `(anonymous, passed to ${parent.expression.getText(source)})`;
  return '(anonymous)';
}

function methodName(node: ts.Node, own: string): string {
  const owner = node.parent && ts.isClassLike(node.parent) ? nameOfNode(node.parent) : undefined;
  return owner ? `${owner}.${own}` : own;
}

/** The functions of one file longer than `limit` lines, in source order. */
export function longFunctions(file: string, text: string, limit = MAX_FUNCTION_LINES): LongFunction[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const lineOf = (position: number): number => source.getLineAndCharacterOfPosition(position).line + 1;
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = lineOf(node.getStart(source));
      const lines = lineOf(node.end) - first + 1;
      if (lines > limit) found.push({ file, line: first, name: describeFunction(node as ts.FunctionLikeDeclaration, source), lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every file and function under `srcDir` over the limits. */
export function measureShape(srcDir: string, limits: ShapeLimits = DEFAULT_LIMITS): ShapeReport {
  const report: ShapeReport = { limits, files: [], functions: [] };
  for (const file of listSourceFiles(srcDir)) {
    const text = readFileSync(path.join(srcDir, file), 'utf8');
    const lines = lineCount(text);
    if (lines > limits.maxFileLines) report.files.push({ file, lines });
    report.functions.push(...longFunctions(file, text, limits.maxFunctionLines));
  }
  return report;
}

/** One line per offender, paths as given relative to the repository (`src/…`). */
export function formatShape(report: ShapeReport, prefix = 'src/'): string {
  return [
    ...report.files.map((f) => `file over ${report.limits.maxFileLines} lines: ${prefix}${f.file} (${f.lines})`),
    ...report.functions.map((f) => `function over ${report.limits.maxFunctionLines} lines: ${prefix}${f.file}:${f.line} ${f.name} (${f.lines})`),
  ].join('\n');
}

/** The command line; returns the exit code. */
export function main(args: string[]): number {
  const at = args.indexOf('--src');
  const srcArg = at >= 0 && args[at + 1] ? args[at + 1]! : 'src';
  const report = measureShape(path.resolve(srcArg));
  if (report.files.length === 0 && report.functions.length === 0) {
    console.log(`code shape: no file over ${MAX_FILE_LINES} lines, no function over ${MAX_FUNCTION_LINES}`);
    return 0;
  }
  console.error(formatShape(report, `${srcArg.replace(/\/$/, '')}/`));
  console.error(`code shape: ${report.files.length} file(s) and ${report.functions.length} function(s) too long`);
  return 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
