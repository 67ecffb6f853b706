// Validates AsyncAPI documents with @asyncapi/parser, the reference parser
// of the AsyncAPI initiative (independent of dedupd): each file named on
// the command line must parse with no error and no warning. Prints one
// line per finding and "FILE: valid" per good file; exits 1 on any bad one.
import { Parser } from '@asyncapi/parser';
import fs from 'fs';

const parser = new Parser();
let bad = 0;
for (const file of process.argv.slice(2)) {
  const { document, diagnostics } = await parser.parse(fs.readFileSync(file, 'utf8'));
  // severity: 0 error, 1 warning, 2 information, 3 hint
  const serious = diagnostics.filter((d) => d.severity <= 1);
  for (const d of serious)
    console.log(`${file}: ${d.severity === 0 ? 'error' : 'warning'} ${d.code}: ${d.message} at ${JSON.stringify(d.path)}`);
  if (!document || serious.length) {
    bad++;
  } else {
    console.log(`${file}: valid`);
  }
}
process.exit(bad ? 1 : 0);
