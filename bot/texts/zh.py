"""The bot's words in Chinese (keys and placeholders as in `en.py`)."""

from __future__ import annotations

TEXTS: dict[str, str] = {
    # commands
    "owner_only": "抱歉，这个命令只有机器人的主人可以使用。",
    "nothing_to_retry": "还没有可以重试的消息。",
    "model_switched": "本会话的模型已切换为 {route}（上下文窗口：{window}）。",
    "model_current": "当前模型：{route}（上下文窗口：{window}）。可用：{choices}",
    "model_unknown": "没有名为 {name} 的模型配置。可用：{choices}",
    "help": "在群里 @我 或回复我的消息即可对话。所有人可用：/retry（重新回答你的上一条消息）、"
    "/id（你的用户 id 和本聊天的 id）、/jobs（定时消息；/jobs cancel j3 取消）、"
    "/memory（我在这里记住的关于你的内容）、/catchup（你错过的内容）、"
    "/settings（群设置，限管理员）、/help。"
    "主人命令：/usage /context /model /dashboard /budget",
    "id_ids": "你的用户 id：{user_id}\n本聊天的 id：{chat_id}",
    "id_groups": "我所在的群：",
    "id_no_groups": "我还没有加入任何群（把我拉进群后，再在这里发送 /id）。",
    "unknown": "未知",
    "dashboard_link": "控制台（链接仅可使用一次，15 分钟内有效）：{url}",
    "dashboard_link_told": "控制台（一次性登录链接，此处不显示）",
    "reply_cut": "…（回复过长，到此截断：每次回复最多 {count} 条消息）",
    "dashboard_sent_privately": "控制台链接已私信发给你。",
    "dashboard_private_failed": "无法私信你：请先打开与我的私聊、点击开始，"
    "然后在私聊里发送 /dashboard。",
    "dashboard_unset": "还没有控制台链接：请设置 DASHBOARD_URL（公开地址）和 DASHBOARD_TOKEN，"
    "并设置 DASHBOARD_PORT 让 `tgbot run` 一并提供；或在机器人所在的机器上运行 `tgbot dashboard`，"
    "在那里打开 http://127.0.0.1:8080/ 。",
    # inbound and crash recovery
    "private_not_allowed": "抱歉，我只在指定的群里对话。你的用户 id 是 {user_id}：如需使用，"
    "请把它发给机器人的主人。",
    "rate_limited": "消息有点多，请稍等一分钟再找我。",
    "restarted_missed": "抱歉，我刚重启过，没来得及回复这条消息。请再问我一次。",
    "restarted_cut": "抱歉，我在回复时重启了，上面的回答可能不完整。发送 /retry 获取完整回答。",
    "internal_error": "抱歉，处理这条消息时出错了。请稍后再试。",
    # a turn that failed (`TurnFailed.key`)
    "overflow": "这段对话太长，模型放不下了。请发 /retry 重试，或换一个上下文更大的模型。",
    "capacity": "这次请求超出了模型的上下文容量，没有发送。请缩短消息或换一个更大的模型。",
    "provider": "模型暂时不可用，请稍后再试。",
    "bad_response": "模型返回了无法理解的结果，请稍后再试。",
    "rejected": "模型服务商拒绝了这次请求，原因已记录在错误列表中，请联系管理员。",
    "refusal": "模型拒绝回答这个请求。",
    "length": "模型的回答超出了输出长度上限，请换一个更简短的问题。",
    "cut_marker": "（因长度限制被截断）",
    # the daily usage summary
    "summary_title": "{day} 用量（{zone}）",
    "summary_empty": "当天没有模型调用。",
    "summary_calls": "调用 {calls} 次，{turns} 轮（每轮 {mean} 次）；{cap} 轮撞到迭代上限",
    "summary_input": "单次输入：p50 {p50} / p90 {p90}",
    "summary_estimated": "（{n} 次为估算）",
    "summary_shares": "历史段 {history} · 固定段 {fixed}",
    "summary_cache": "缓存命中 {cache} · 每次计费等效输入 {billable} · 输出 {output}",
    "summary_drift": "估算误差（{route}）：中位 {median}，p90 {p90}；校正后 p90 {corrected}",
    "summary_misc": "裁剪 {trims} 次 · 错误 {errors} 次 · 费用 {cost}",
    "summary_compaction": "压缩：{calls} 次摘要调用，占{base} {share}",
    "summary_cache_writes": "缓存写入 {writes}（占输入 {rate}），占{base} {share}",
    "summary_reasoning": "推理 {reasoning}（输出共 {output}）",
    "summary_stops": "停止原因：拒绝 {refusals} 次，因输出上限截断 {cut} 次",
    "summary_cost_base": "费用",
    "summary_weight_base": "计费等效输入",
    "summary_truncated": "⚠ {n} 次调用报告的输入远少于发送的内容：服务商静默丢弃了最早的消息"
    "（Ollama：调大 num_ctx）",
    "summary_feedback": "反馈表情：👍 {up} · 👎 {down} · 其他 {other}",
    "summary_skipped": "跳过 {n} 行无法读取的账本",
    "summary_caption": "最近 {n} 天单次输入 p50 与缓存命中率",
    # 系统提示：何时搜索聊天记录
    "prompt_search_history": "如果有人问起以前说过、但眼前的消息和摘要里都没有的内容（密码、日期、"
    "链接、谁说过什么），先用几个有区分度的词调用 search_history 再回答，不要猜；"
    "搜不到就如实说。",
    # spend limits (`[limits]`, bot.agent.spend)
    "budget": "已达到花费上限，重置后我会再回答。",
    "budget_unset": "没有设置花费上限（配置文件中的 `[limits]`）。",
    "spend_member_limit": "你在这里的今日额度已用完，将于 {reset} 重置。",
    "spend_chat_limit": "这个聊天今日额度已用完，将于 {reset} 重置。",
    "spend_day_limit": "我今天的额度已用完，将于 {reset} 重置。",
    "spend_month_limit": "我本月的额度已用完，将于 {reset} 重置。",
    "spend_name_day": "每日预算（{period}）",
    "spend_name_month": "每月预算（{period}）",
    "spend_owner_warning": "{budget} 已用 {share}：{spent}。",
    "spend_owner_reached": "{budget} 已用完（{share}）：{spent}。在重置前其他人的请求会被拒绝，"
    "你不受影响。发送 /budget 查看详情。",
    # reminders and scheduled posts (`[jobs]`, bot.services.jobs)
    "jobs_late_note": "（迟到了：这条原定 {when} 发送，当时我没有在运行。）",
    "jobs_missed": "你设定的 {job}（“{preview}”）原定 {when}，已错过：当时我没有在运行，"
    "现在发已太迟。",
    "jobs_failed": "你设定的 {job}（“{preview}”）未能送达。Telegram 的回复：{reason}",
    "jobs_task_failed": "你设定的定时任务 {job}（“{preview}”）没有完成，原因：{reason}",
    "jobs_none": "这里没有定时任务。",
    "jobs_header": "定时任务：",
    "jobs_line": "{job} · {when} · {repeat} · {mode} · 由 {creator} 设定：{preview}",
    "jobs_once": "一次",
    "jobs_cancelled": "已取消 {job}。",
    "jobs_cancel_usage": "用法：/jobs cancel j3",
    "jobs_not_found": "这里没有进行中的任务 {job}。",
    "jobs_not_yours": "只有设定 {job} 的人、本群管理员或机器人主人可以取消它。",
    # /settings and /catchup (docs/groups.md)
    "settings_private": "/settings 只能在群里用：每个群各有自己的设置。",
    "settings_admins_only": "只有本群管理员可以查看或修改本群设置。",
    "settings_title": "本群设置（✎：管理员可修改）：",
    "settings_usage": "修改：/settings 名称 值（恢复配置文件的值：/settings 名称 reset）",
    "settings_unknown": "没有名为 {name!r} 的设置。可用：{names}。",
    "settings_not_allowed": "主人没有允许管理员在这里修改 {name}。",
    "settings_value_missing": "/settings {name} 值（恢复：/settings {name} reset）",
    "settings_bad_value": "{name}：{reason}",
    "settings_unknown_route": "route：{route!r} 中的模型配置不存在",
    "settings_prompt_change": "修改 {name} 会改变本群的系统提示词：模型为本群缓存的前缀将重新开始"
    "（下一次回答更贵）。发送 /settings {name} {value} confirm 确认修改。",
    "settings_changed": "{name} 现在是 {value}",
    "settings_reset": "{name} 现在是 {value}（配置文件的值）",
    "catchup_usage": "/catchup [小时数]：1 到 {max} 小时",
    "catchup_budget": "本群今天的预算已用完：现在无法总结。",
    "catchup_nothing": "那之后没有新消息。",
    "catchup_failed": "现在没能写出总结，请一分钟后再试。",
    "memory_listed": "我在本聊天中记住的关于你的内容（{count} 条）；/memory forget f3 删除一条，"
    "/memory clear 全部删除：",
    "memory_told": "已列出该成员记住的 {count} 条内容（/memory）",
    "memory_none": "我在本聊天中没有记住关于你的任何内容。",
    "memory_forgotten": "已忘记 {alias}。",
    "memory_cleared": "已忘记本聊天中关于你的全部内容（{count} 条）。",
    "memory_unknown": "你在本聊天中没有编号为 {alias} 的记忆（/memory 可查看）。",
    "memory_usage": "用法：/memory（查看我在这里记住的关于你的内容），/memory forget f3，"
    "/memory clear",
}
