// The series selectors of PromQL expressions, read with Prometheus' own PromQL grammar
// (@prometheus-io/lezer-promql, the parser of Prometheus' web UI), for promql.py.
//
//   node promql_selectors.cjs NODE_MODULES_PARENT < exprs.json > selectors.json
//
// In: a JSON array of expressions. Out: a JSON array, per expression either
// {"selectors": [...]} or {"error": "..."} (a syntax error anywhere in it). A selector is
// {metric, matchers: [[label, op, value]], has_range, calls: [{name, grouping, labels}]},
// its calls the functions and aggregations around it, innermost first.
"use strict";

const path = require("node:path");
const fs = require("node:fs");

const modules = process.argv[2];
if (!modules) {
  process.stderr.write("usage: node promql_selectors.cjs DIR_WITH_NODE_MODULES < exprs.json\n");
  process.exit(2);
}
const { parser } = require(require.resolve("@prometheus-io/lezer-promql",
  { paths: [path.resolve(modules)] }));

function unquote(literal) {
  if (literal.startsWith("`")) return literal.slice(1, -1);
  return JSON.parse(literal.startsWith("'")
    ? `"${literal.slice(1, -1).replace(/\\'/g, "'").replace(/"/g, '\\"')}"`
    : literal);
}

function childrenOf(node) {
  const found = [];
  for (let child = node.firstChild; child; child = child.nextSibling) found.push(child);
  return found;
}

function selectorsOf(expr) {
  const tree = parser.parse(expr);
  const text = (node) => expr.slice(node.from, node.to);
  let error = null;
  tree.iterate({
    enter(node) {
      if (node.type.isError && error === null) {
        error = `syntax error at ${node.from}: ${JSON.stringify(expr.slice(node.from, node.from + 30))}`;
      }
    },
  });
  if (error !== null) return { error };

  const selectors = [];
  tree.iterate({
    enter(ref) {
      if (ref.name !== "VectorSelector") return;
      const node = ref.node;
      const selector = { metric: null, matchers: [], has_range: false, calls: [] };
      for (const child of childrenOf(node)) {
        if (child.name === "Identifier") selector.metric = text(child);
        if (child.name !== "LabelMatchers") continue;
        for (const matcher of childrenOf(child)) {
          const parts = childrenOf(matcher);
          const label = parts.find((part) => part.name === "LabelName" || part.name === "QuotedLabelName");
          const op = parts.find((part) => part.name === "MatchOp");
          const value = parts.find((part) => part.name === "StringLiteral");
          if (!op && label && label.name === "QuotedLabelName") {
            // {"metric_name"}: the metric name, quoted.
            selector.metric = unquote(text(label));
            continue;
          }
          const name = label.name === "QuotedLabelName" ? unquote(text(label)) : text(label);
          if (name === "__name__" && text(op) === "=") {
            selector.metric = unquote(text(value));
            continue;
          }
          selector.matchers.push([name, text(op), unquote(text(value))]);
        }
      }
      for (let up = node.parent; up; up = up.parent) {
        if (up.name === "MatrixSelector" || up.name === "SubqueryExpr") selector.has_range = true;
        if (up.name === "FunctionCall") {
          const ident = childrenOf(up).find((part) => part.name === "FunctionIdentifier");
          selector.calls.push({ name: text(ident), grouping: null, labels: [] });
        }
        if (up.name === "AggregateExpr") {
          const parts = childrenOf(up);
          const call = { name: text(parts.find((part) => part.name === "AggregateOp")),
                         grouping: null, labels: [] };
          const modifier = parts.find((part) => part.name === "AggregateModifier");
          if (modifier) {
            for (const part of childrenOf(modifier)) {
              if (part.name === "By" || part.name === "Without") call.grouping = text(part);
              if (part.name === "GroupingLabels") {
                call.labels = childrenOf(part).filter((label) => label.name === "LabelName")
                  .map(text);
              }
            }
          }
          selector.calls.push(call);
        }
      }
      selectors.push(selector);
    },
  });
  return { selectors };
}

const exprs = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(exprs.map(selectorsOf)));
