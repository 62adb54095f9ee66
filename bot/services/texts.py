"""What the bot says to people outside model answers, in each locale."""

from __future__ import annotations

from typing import Literal

Locale = Literal["zh", "en"]

TEXTS: dict[Locale, dict[str, str]] = {
    "zh": {
        "owner_only": "抱歉，这个命令只有机器人的主人可以使用。",
        "rate_limited": "消息有点多，请稍等一分钟再找我。",
        "nothing_to_retry": "还没有可以重试的消息。",
        "model_switched": "本会话的模型已切换为 {route}（上下文窗口：{window}）。",
        "model_current": "当前模型：{route}（上下文窗口：{window}）。可用：{choices}",
        "model_unknown": "没有名为 {name} 的模型配置。可用：{choices}",
        "help": "在群里 @我 或回复我的消息即可对话。主人命令：/usage /context /model /retry",
        "unknown": "未知",
        "restarted_missed": "抱歉，我刚重启过，没来得及回复这条消息。请再问我一次。",
        "restarted_cut": "抱歉，我在回复时重启了，上面的回答可能不完整。发送 /retry 获取完整回答。",
        "internal_error": "抱歉，处理这条消息时出错了。请稍后再试。",
    },
    "en": {
        "owner_only": "Sorry, only the bot's owner can use this command.",
        "rate_limited": "That's a lot of messages — please give me a minute.",
        "nothing_to_retry": "There is no message to retry yet.",
        "model_switched": "This chat now uses {route} (context window: {window}).",
        "model_current": "Current model: {route} (context window: {window}). Available: {choices}",
        "model_unknown": "No model profile named {name}. Available: {choices}",
        "help": "Mention me or reply to me in a group to talk. Owner commands: "
        "/usage /context /model /retry",
        "unknown": "unknown",
        "restarted_missed": "Sorry, I was restarted and missed this message. Please ask again.",
        "restarted_cut": "Sorry, I was restarted while replying, so the answer above may be "
        "incomplete. Send /retry for the whole answer.",
        "internal_error": "Sorry, something went wrong with this message. Please try again.",
    },
}


def text(locale: Locale, key: str, **values: object) -> str:
    return TEXTS[locale][key].format(**values)
