/**
 * What a PromQL expression uses, read with Prometheus' own grammar (@prometheus-io/lezer-promql,
 * the parser of the Prometheus web UI's editor): whether it parses, the series selectors with
 * their label matchers, and the labels each aggregation groups `by` or each binary operation
 * matches `on` — labels that must exist on the series below them, or the result is empty.
 */
import type { SyntaxNode } from '@lezer/common';
import { parser } from '@prometheus-io/lezer-promql';

export interface Matcher {
  label: string;
  op: string;
  value: string;
}

export interface Selector {
  metric: string;
  matchers: Matcher[];
}

/** The labels of a `by (…)` or `on (…)` clause, and every selector it aggregates or matches. */
export interface Grouping {
  clause: string;
  labels: string[];
  selectors: Selector[];
}

export interface PromqlUse {
  /** Where the parser had to recover (none when the expression is valid PromQL). */
  errors: string[];
  selectors: Selector[];
  groupings: Grouping[];
}

/** Parses `expr` and lists what it uses; `errors` is empty when it parses whole. */
export function analyse(expr: string): PromqlUse {
  const tree = parser.parse(expr);
  const errors: string[] = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors.push(`at ${node.from}: …${expr.slice(Math.max(0, node.from - 20), node.from + 20)}…`);
    },
  });
  const top = tree.topNode;
  const groupings: Grouping[] = [];
  for (const node of descendants(top)) {
    if (node.name === 'AggregateExpr') {
      const modifier = node.getChild('AggregateModifier');
      if (modifier?.getChild('By')) groupings.push(grouping(expr, modifier, node));
    }
    if (node.name === 'BinaryExpr') {
      const clause = node.getChild('MatchingModifierClause');
      if (clause?.getChild('On')) groupings.push(grouping(expr, clause, node));
    }
    if (node.name === 'QuotedLabelMatcher' || node.name === 'QuotedLabelName') errors.push(`quoted label names are not used here: ${text(expr, node)}`);
  }
  const selectors = descendants(top).filter((n) => n.name === 'VectorSelector').map((n) => selector(expr, n));
  for (const s of selectors) if (s.metric === '') errors.push('a selector without a metric name');
  return { errors, selectors, groupings };
}

function grouping(expr: string, clause: SyntaxNode, scope: SyntaxNode): Grouping {
  const labels = (clause.getChild('GroupingLabels')?.getChildren('LabelName') ?? []).map((n) => text(expr, n));
  const selectors = descendants(scope).filter((n) => n.name === 'VectorSelector').map((n) => selector(expr, n));
  return { clause: text(expr, clause), labels, selectors };
}

function selector(expr: string, node: SyntaxNode): Selector {
  const name = node.getChild('Identifier');
  const matchers = (node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []).map((m) => ({
    label: text(expr, m.getChild('LabelName')!),
    op: text(expr, m.getChild('MatchOp')!),
    value: unquote(text(expr, m.getChild('StringLiteral')!)),
  }));
  return { metric: name ? text(expr, name) : '', matchers };
}

function descendants(node: SyntaxNode): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  for (let child = node.firstChild; child; child = child.nextSibling) out.push(child, ...descendants(child));
  return out;
}

function text(expr: string, node: SyntaxNode): string {
  return expr.slice(node.from, node.to);
}

/** A PromQL string literal's value: "…" with Go escapes (as JSON's for what is used here), '…' or `…`. */
function unquote(literal: string): string {
  if (literal.startsWith('"')) return JSON.parse(literal) as string;
  return literal.slice(1, -1);
}
