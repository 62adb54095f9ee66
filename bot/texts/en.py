"""The bot's words in English (keys and placeholders as in `zh.py`)."""

from __future__ import annotations

TEXTS: dict[str, str] = {
    # commands
    "owner_only": "Sorry, only the bot's owner can use this command.",
    "nothing_to_retry": "There is no message to retry yet.",
    "model_switched": "This chat now uses {route} (context window: {window}).",
    "model_current": "Current model: {route} (context window: {window}). Available: {choices}",
    "model_unknown": "No model profile named {name}. Available: {choices}",
    "help": "Mention me or reply to me in a group to talk. For everyone: /retry (answer your "
    "last message again), /id (your user id and this chat's id), /jobs (scheduled posts; "
    "/jobs cancel j3), /memory (what I keep about you here), /catchup (what you missed), "
    "/settings (a group's settings, for its admins), /help. Owner commands: "
    "/usage /context /model /dashboard /budget",
    "id_ids": "Your user id: {user_id}\nThis chat's id: {chat_id}",
    "id_groups": "Groups I am in:",
    "id_no_groups": "I am in no group yet (add me to one, then send /id here again).",
    "unknown": "unknown",
    "dashboard_link": "The dashboard (this link works once, for 15 minutes): {url}",
    "dashboard_link_told": "The dashboard (a one-time login link, not shown here)",
    "reply_cut": "…(reply cut here: at most {count} messages per reply)",
    "dashboard_sent_privately": "I sent you a private message with the dashboard link.",
    "dashboard_private_failed": "I could not message you privately: open a private chat with "
    "me, press Start, and send /dashboard there.",
    "dashboard_unset": "No dashboard link yet: set DASHBOARD_URL (its public address) and "
    "DASHBOARD_TOKEN, and DASHBOARD_PORT for `tgbot run` to serve it; or run `tgbot dashboard` "
    "on the bot's machine and open http://127.0.0.1:8080/ there.",
    # inbound and crash recovery
    "rate_limited": "That's a lot of messages — please give me a minute.",
    "private_not_allowed": "Sorry, I only talk in the groups I was set up for. Your user id is "
    "{user_id}: send it to the bot's owner if you should be let in.",
    "restarted_missed": "Sorry, I was restarted and missed this message. Please ask again.",
    "restarted_cut": "Sorry, I was restarted while replying, so the answer above may be "
    "incomplete. Send /retry for the whole answer.",
    "internal_error": "Sorry, something went wrong with this message. Please try again.",
    # a turn that failed (`TurnFailed.key`)
    "overflow": "This conversation no longer fits the model. Send /retry, or switch to a "
    "model with a larger context window.",
    "capacity": "This request does not fit the model's context window and was not sent. "
    "Shorten the message or choose a larger model.",
    "provider": "The model is unavailable right now. Please try again in a moment.",
    "bad_response": "The model sent a reply I could not read. Please try again.",
    "rejected": "The model provider refused the request. The operator can see why in the "
    "error list.",
    "refusal": "The model declined to answer this.",
    "length": "The model's answer did not fit its output limit. Please ask for something shorter.",
    "cut_marker": "(cut at the length limit)",
    # the daily usage summary
    "summary_title": "Usage for {day} ({zone})",
    "summary_empty": "No model calls.",
    "summary_calls": "Calls: {calls} in {turns} turns ({mean} per turn); {cap} hit the "
    "iteration cap",
    "summary_input": "Input per call: p50 {p50} / p90 {p90}",
    "summary_estimated": " ({n} estimated)",
    "summary_shares": "History {history} · fixed {fixed} of input",
    "summary_cache": "Cache hit {cache} · billable-equivalent input {billable}/call · "
    "output {output}",
    "summary_drift": "Estimate error ({route}): median {median}, p90 {p90}; corrected p90 "
    "{corrected}",
    "summary_misc": "Trims {trims} · errors {errors} · cost {cost}",
    "summary_compaction": "Compaction: {calls} summary calls, {share} of the {base}",
    "summary_cache_writes": "Cache writes {writes} ({rate} of input), {share} of the {base}",
    "summary_reasoning": "Reasoning {reasoning} of the {output} output tokens",
    "summary_stops": "Stops: {refusals} refused, {cut} cut at the output limit",
    "summary_cost_base": "cost",
    "summary_weight_base": "billable-equivalent input",
    "summary_truncated": "⚠ {n} calls reported far less input than was sent: the provider "
    "dropped the oldest messages (Ollama: raise num_ctx)",
    "summary_feedback": "Feedback reactions: 👍 {up} · 👎 {down} · other {other}",
    "summary_skipped": "Skipped {n} unreadable ledger lines",
    "summary_caption": "Input per call p50 and cache hit rate, last {n} days",
    # the system prompt: when to search the chat's history
    "prompt_search_history": "When someone asks about something said earlier that neither "
    "the messages in view nor the summary hold (a password, a date, a link, who said what), "
    "call search_history with a few distinctive words before you answer; never guess. If it "
    "finds nothing, say so.",
    # spend limits (`[limits]`, bot.agent.spend)
    "budget": "The spending limit is reached; I will answer again when it resets.",
    "budget_unset": "No spend limits are set (`[limits]` in the config file).",
    "spend_member_limit": "You have reached your daily limit here; it resets at {reset}.",
    "spend_chat_limit": "This chat has reached its daily limit; it resets at {reset}.",
    "spend_day_limit": "I have reached my daily limit; it resets at {reset}.",
    "spend_month_limit": "I have reached my monthly limit; it resets on {reset}.",
    "spend_name_day": "daily budget ({period})",
    "spend_name_month": "monthly budget ({period})",
    "spend_owner_warning": "{share} of the {budget} is spent: {spent}.",
    "spend_owner_reached": "The {budget} is spent ({share}): {spent}. Members are refused "
    "until it resets; you are not. /budget shows the details.",
    # reminders and scheduled posts (`[jobs]`, bot.services.jobs)
    "jobs_late_note": "(Late: this was due at {when}; I was not running then.)",
    "jobs_missed": "Your scheduled {job} (“{preview}”), due at {when}, was missed: I was not "
    "running then, and it is too late to send it now.",
    "jobs_failed": "Your scheduled {job} (“{preview}”) could not be delivered. Telegram said: "
    "{reason}",
    "jobs_task_failed": "Your scheduled task {job} (“{preview}”) did not run to an answer: "
    "{reason}",
    "jobs_none": "No scheduled jobs here.",
    "jobs_header": "Scheduled jobs:",
    "jobs_line": "{job} · {when} · {repeat} · {mode} · by {creator}: {preview}",
    "jobs_once": "once",
    "jobs_cancelled": "Cancelled {job}.",
    "jobs_cancel_usage": "Usage: /jobs cancel j3",
    "jobs_not_found": "There is no active job {job} here.",
    "jobs_not_yours": "Only whoever set {job}, the chat's administrators or the owner may "
    "cancel it.",
    # /settings and /catchup (docs/groups.md)
    "settings_private": "/settings works in a group: each group has its own.",
    "settings_admins_only": "Only the group's admins may see or change its settings.",
    "settings_title": "Settings of this chat (✎: admins may change it):",
    "settings_usage": "Change one: /settings NAME VALUE (reset: /settings NAME reset)",
    "settings_unknown": "No setting {name!r}. Settings: {names}.",
    "settings_not_allowed": "{name} is not one the owner lets admins change here.",
    "settings_value_missing": "/settings {name} VALUE (reset: /settings {name} reset)",
    "settings_bad_value": "{name}: {reason}",
    "settings_unknown_route": "route: no provider profile in {route!r}",
    "settings_prompt_change": "Changing {name} changes this chat's system prompt: the model's "
    "cached prefix for this chat starts over (the next answer costs more). Send "
    "/settings {name} {value} confirm to apply.",
    "settings_changed": "{name} is now {value}",
    "settings_reset": "{name} is now {value} (as the config file says)",
    "catchup_usage": "/catchup [hours]: hours from 1 to {max}",
    "catchup_budget": "This chat's budget for today is spent: no catch-up now.",
    "catchup_nothing": "Nothing new since then.",
    "catchup_failed": "The catch-up could not be written just now; try again in a minute.",
    "memory_listed": "What I keep about you in this chat ({count}); /memory forget f3 deletes "
    "one, /memory clear all:",
    "memory_told": "listed the member's {count} kept facts (/memory)",
    "memory_none": "I keep nothing about you in this chat.",
    "memory_forgotten": "Forgot {alias}.",
    "memory_cleared": "Forgot everything I kept about you in this chat ({count}).",
    "memory_unknown": "You have no kept fact {alias} in this chat (/memory lists yours).",
    "memory_usage": "Usage: /memory (what I keep about you here), /memory forget f3, /memory clear",
}
