// cmux.js: an OpenCode plugin that reports this OpenCode's turns to the cmux pane it runs
// in. It forwards the few events that say what the session is doing to cmux-hook (one at a
// time, in order, never awaited by OpenCode) and does nothing outside a cmux pane.
// Installed by the cmux-opencode integration, which fills in CMUX_HOOK below.
import { spawn } from "node:child_process";

const CMUX_HOOK = process.env.CMUX_HOOK_COMMAND || "@CMUX_HOOK@";
const FORWARDED = new Set([
  "session.created", "session.status", "session.idle",
  "permission.asked", "permission.updated", "permission.replied",
]);

export const CmuxPlugin = async () => {
  if (!process.env.CMUX_SOCKET_PATH || !process.env.CMUX_PANE_ID) return {};
  const subagentSessions = new Set();
  let queue = Promise.resolve();
  let lastStatus; // OpenCode repeats session.status busy at every step: forward changes only

  const report = (type, properties) => {
    const status = type === "session.idle" ? "idle"
      : type === "session.status" ? properties.status?.type : undefined;
    if (status !== undefined && status === lastStatus) return;
    lastStatus = status;
    queue = queue.then(() => new Promise((resolve) => {
      try {
        const child = spawn(CMUX_HOOK, ["opencode"], { stdio: ["pipe", "ignore", "ignore"] });
        child.on("error", resolve);
        child.on("close", resolve);
        child.stdin.on("error", () => {});
        child.stdin.end(JSON.stringify({ type, properties }));
      } catch {
        resolve();
      }
    }));
  };
  // A subagent runs in a child session: its turns must not move the main session's state.
  const fromSubagent = (sessionID) => sessionID !== undefined && subagentSessions.has(sessionID);

  return {
    event: async ({ event }) => {
      if (!event || !FORWARDED.has(event.type)) return;
      const properties = event.properties ?? {};
      if (event.type === "session.created" && properties.info?.parentID) {
        subagentSessions.add(properties.info.id);
        return;
      }
      if (fromSubagent(properties.sessionID ?? properties.info?.id)) return;
      report(event.type, properties);
    },
    "chat.message": async (input, output) => {
      if (fromSubagent(input?.sessionID)) return;
      const text = (output?.parts ?? [])
        .filter((part) => part?.type === "text" && typeof part.text === "string")
        .map((part) => part.text).join(" ");
      const model = input?.model ? `${input.model.providerID}/${input.model.modelID}` : null;
      report("chat.message", { text, model });
    },
    "tool.execute.before": async (input, output) => {
      if (fromSubagent(input?.sessionID)) return;
      report("tool.execute.before", { tool: input?.tool, args: output?.args });
    },
    "tool.execute.after": async (input) => {
      if (fromSubagent(input?.sessionID)) return;
      report("tool.execute.after", { tool: input?.tool });
    },
  };
};
