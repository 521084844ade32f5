// @thinkwell/conductor, the TypeScript conductor, as a stdio program:
// `node thinkwell.mjs PROXY... AGENT`, each a command string, the agent
// last; the editor talks to it on stdin/stdout. Its MCP bridge is on, as by
// default: acp: servers the proxies declare reach the agent over HTTP. The
// tests run proxies built on the proxy library under it.
import { Conductor, fromCommands } from "@thinkwell/conductor";
import { createInterface } from "node:readline";

const commands = process.argv.slice(2);
if (commands.length === 0) {
  console.error("usage: node thinkwell.mjs [PROXY...] AGENT");
  process.exit(2);
}

// The conductor's own stdio, in the shape of its connectors: connect()
// gives send(message), an async iterable of messages, and close().
const stdio = {
  async connect() {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    return {
      send: (message) => process.stdout.write(JSON.stringify(message) + "\n"),
      messages: (async function* () {
        for await (const line of lines) {
          if (line.trim()) yield JSON.parse(line);
        }
      })(),
      close: async () => lines.close(),
    };
  },
};

await new Conductor({ instantiator: fromCommands(commands) }).connect(stdio);
process.exit(0);
