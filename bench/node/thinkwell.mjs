// @thinkwell/conductor, the TypeScript conductor, as a stdio program, the way
// its README connects it: `node thinkwell.mjs PROXY... AGENT`, each a command
// string; the last one is the agent. The editor talks to it on stdin/stdout.
import { Conductor, fromCommands } from "@thinkwell/conductor";
import { createInterface } from "node:readline";

const commands = process.argv.slice(2);
if (commands.length === 0) {
  console.error("usage: node thinkwell.mjs [PROXY...] AGENT");
  process.exit(2);
}

// A connector for the conductor's own stdio, in the shape of its connectors:
// connect() gives send(message), an async iterable of messages, and close().
class OwnStdio {
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
  }
}

const conductor = new Conductor({ instantiator: fromCommands(commands), mcpBridgeMode: "disabled" });
await conductor.connect(new OwnStdio());
process.exit(0);
