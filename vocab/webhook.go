package vocab

// MetaWebhook is the tools/call _meta entry that asks for a completion
// webhook: {"url": "https://…"}. When the task reaches a terminal status
// the api POSTs its outcome there, signed (package webhook).
const MetaWebhook = "io.mcpqueue/webhook"
