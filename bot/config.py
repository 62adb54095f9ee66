"""One settings object: environment variables plus an optional TOML file.

Read once by the composition root (`bot/app`); everything else receives plain
values or small frozen policy objects. The TOML file (`--config PATH` or `BOT_CONFIG`) holds
everything that is not an environment contract: scene budgets, caps, provider profiles,
the daily schedule. Environment variables win over the file.

See docs/architecture.md, Settings.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from bot.config_errors import (
    clean_message,
    named_error,
    read_toml,
    refuse_unknown_env,
    refuse_unknown_keys,
    source_error,
    toml_error,
)
from bot.context.tool_results import DEFAULT_MAX_TOOL_RESULT_CHARS
from bot.domain.ids import Locale
from bot.ports import OWNED_BODY_KEYS, ReasoningLevel

DEFAULT_TELEGRAM_API_BASE = "https://api.telegram.org"
_WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
MIN_DASHBOARD_TOKEN_CHARS = 16
"""A shorter `DASHBOARD_TOKEN` is refused at start-up: the token protects a dashboard bound on
every interface, and 16 characters is the least `openssl rand -hex 8` gives (64 bits)."""


class Section(BaseModel):
    """Every settings section: an unknown key is refused, whether it comes from the TOML
    file, an `A__B` environment variable or code (`load_settings` names it with a "did you
    mean"). New sections and profiles derive from this, so strictness needs no extra step."""

    model_config = ConfigDict(extra="forbid")


class SceneHistory(Section):
    """Per-scene overrides of the caps (`[history.group]`, `HISTORY__GROUP__…`); unset: the
    shared value."""

    max_history_turns: int | None = Field(None, ge=0)
    max_recent_messages: int | None = Field(None, ge=1)


class HistorySettings(Section):
    """History window limits per scene; the first limit reached wins.

    `max_history_turns` counts the turns the bot answered (in a group most member messages
    are never answered; see `bot.context.window`)."""

    group_tokens: int = Field(8_000, ge=0)
    private_tokens: int = Field(12_000, ge=0)
    owner_tokens: int = Field(24_000, ge=0)
    max_history_turns: int = Field(50, ge=0)
    max_recent_messages: int = Field(100, ge=1)
    headroom: float = Field(0.25, ge=0.0, lt=1.0)
    turn_cap_counts: Literal["answered", "all"] = "answered"
    """`all`: every turn counts against `max_history_turns` (the count before answered turns)."""
    group: SceneHistory = SceneHistory(max_recent_messages=300)
    """Groups: 300 messages, so the token budget governs (measured in bench/group_window:
    at 100 a short-message group sees ~75 messages in ~2,500 of 8,000 tokens and moves its
    window every ~25 messages, most of them with no reply in between to prepare a summary)."""
    private: SceneHistory = SceneHistory()
    owner: SceneHistory = SceneHistory()


class CompactionSettings(Section):
    """The rolling summary of turns that left the window (docs/context-window.md, The summary)."""

    enabled: bool = True
    group_tokens: int = Field(600, ge=1)
    private_tokens: int = Field(800, ge=1)
    owner_tokens: int = Field(1_500, ge=1)
    route: str | None = None
    """`provider` or `provider:model`; unset: the chat's own route (its cache is warm)."""
    prepare_margin: float = Field(0.1, ge=0.0, lt=1.0)
    """Prepare the next summary after a reply once the window is within this share of a
    limit."""


class HistoryPruning(Section):
    enabled: bool = False
    max_tokens: int = Field(0, ge=0)


class RuntimeSettings(Section):
    """Budgets and caps of the agent runtime (docs/context-window.md, Runtime budget)."""

    max_context_tokens: int | None = Field(None, ge=0)
    context_compact_ratio: float | None = None
    history_pruning: HistoryPruning = HistoryPruning()
    max_tool_iterations: int = Field(10, ge=1)
    max_tool_result_chars: int = Field(DEFAULT_MAX_TOOL_RESULT_CHARS, ge=0)
    max_tool_calls_per_step: int = Field(8, ge=0)
    """Tool calls of one model response that run; the rest are refused (0: no cap)."""
    max_messages_per_turn: int = Field(5, ge=0)
    """Messages tools may post in one turn, besides its reply (0: no cap)."""
    max_output_tokens: int | None = Field(None, ge=1)
    request_timeout_seconds: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)
    model_call_deadline_seconds: float = Field(180.0, gt=0)
    """Total time one model call may take, retries included (the read timeout restarts
    with every byte; a model sending one byte a second would never end without this)."""
    turn_deadline_seconds: float = Field(600.0, gt=0)
    """Total time one turn may take, all its model calls and tools included."""
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    """On SIGTERM, how long running turns may finish before they are cancelled."""
    orphan_scan_seconds: float = Field(25.0, gt=0)
    """On PostgreSQL, how often (±20 %) each worker looks for turns a killed worker left
    unanswered and runs them (`bot.services.recovery`); SQLite recovers at start-up only."""


ProviderKind = Literal["openai", "anthropic"]
CacheSetting = Literal["auto", "breakpoints", "off"]
CacheTTLSetting = Literal["5m", "1h"]


class ProviderProfile(Section):
    """One endpoint (`[providers.<name>]`). The key is read from the env variable
    `api_key_env`. Unset dialect settings take the defaults of the base URL's host."""

    base_url: str
    api_key_env: str | None = None
    kind: ProviderKind | None = None
    """`openai` (chat completions) or `anthropic` (the native Messages API); unset:
    `anthropic` for api.anthropic.com or a base URL ending in `/anthropic`, else `openai`."""
    cache: CacheSetting | None = None
    """`breakpoints` marks the cache plan, `auto` leaves caching to the provider, `off` sends
    no cache hints; unset: `breakpoints` for anthropic and the hosts that take markers."""
    cache_ttl: CacheTTLSetting = "5m"
    prompt_cache_key: bool | None = None
    """Send one key per chat session as `prompt_cache_key`; unset: on for api.openai.com."""
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None
    """Unset: `max_completion_tokens` for GPT-5-family and o-series models."""
    stream: bool = True
    """Stream replies where a live draft asks for it."""
    model: str = ""
    context_window: int = 0
    tokenizer_file: Path | None = None
    """An exact offline tokenizer for `model`: a tiktoken BPE file or a `tokenizer.json`."""
    tokenizer_pattern: str | None = None
    """The split pattern of a tiktoken file: cl100k, o200k, qwen or a regex."""
    price_input_per_mtok: float = 0.0
    price_cached_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0
    price_cache_write_per_mtok: float = 0.0
    """5-minute cache writes (Anthropic: 1.25 × input)."""
    price_cache_write_1h_per_mtok: float | None = Field(None, ge=0)
    """1-hour cache writes; unset: 2 × `price_input_per_mtok` (Anthropic's price)."""
    reasoning: ReasoningLevel = "auto"
    """How hard the model thinks, mapped to the provider's own field (`auto`: send nothing,
    the provider decides). Changing it starts a new cached prefix."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Fields merged into every request body (a TOML table), for what is not modelled here;
    never one the bot writes itself (`model`, `messages`, `tools`…)."""

    @field_validator("extra_body")
    @classmethod
    def _not_owned(cls, value: dict[str, Any]) -> dict[str, Any]:
        owned = sorted(OWNED_BODY_KEYS & set(value))
        if owned:
            raise ValueError(
                f"{', '.join(owned)}: the bot writes {'these' if len(owned) > 1 else 'this'} "
                "itself; remove it from extra_body"
            )
        return value

    vision: bool = False
    """The model sees images: the turn's photos go with the current message. Off: no image
    bytes are sent, the model is told it cannot see them."""
    fallbacks: list[str] = Field(default_factory=list)
    """Profiles that take a call, in order, when this one is down (5xx, 529, a 429 after
    its retries, a timeout, a refused connection) and nothing of the reply was shown."""
    fallback_cooldown_seconds: float = Field(300.0, ge=0)
    """How long a session stays on a fallback before trying this profile again; also how
    long every chat skips this profile once it failed repeatedly."""


class TriggerSettings(Section):
    """When the bot answers in groups, and how bursts are merged into one turn; the
    defaults of every chat (`[chats."<id>".triggers]` overrides them, docs/groups.md)."""

    answer_on_mention: bool = True
    answer_on_reply: bool = True
    answer_on_command: bool = True
    merge_window_seconds: float = Field(1.5, ge=0)
    command_prefix: str = "/"
    keywords: list[str] = Field(default_factory=list)
    """Whole words (any case, any script) that make a message address the bot."""
    patterns: list[str] = Field(default_factory=list)
    """Regular expressions that make a message address the bot; each must match in linear
    time (no nested quantifiers, backreferences or lookarounds), or start-up refuses it."""
    ambient: Literal["off", "judge"] = "off"
    """`judge`: an unaddressed group message may be answered, past the fixed gates and one
    short judge call on `ambient_route`."""
    ambient_route: str | None = None
    """The judge's route (`profile`, `profile:model` or `model`); unset: the chat's."""
    ambient_cooldown_seconds: int = Field(600, ge=0)
    ambient_daily_max: int = Field(10, ge=0)
    answer_bots: bool = False
    """Other bots' messages may trigger a turn (a loop guard stops long exchanges)."""
    ambient_settle_seconds: float = Field(10.0, ge=0)
    """A burst settles when nobody wrote for this long; only its newest message is judged."""
    ambient_judge_max_tokens: int = Field(1_200, ge=200)
    """The judge's whole input, a hard cap: the newest messages that fit are sent."""


class TelegramSettings(Section):
    """How the bot shows itself in Telegram while it works."""

    stream_drafts: bool = True
    """In private chats, preview a streamed reply with `sendMessageDraft` as it is written."""
    per_chat_per_second: float = Field(1.0, ge=0)
    """Outbound pacing (Telegram's Bot FAQ limits): at most this many messages or reactions a
    second in one chat; 0 turns it off."""
    per_group_per_minute: int = Field(20, ge=0)
    """At most this many messages in any minute in one group (or channel); 0: off."""
    per_bot_per_second: int = Field(30, ge=0)
    """At most this many messages a second over all chats; 0: off."""
    poll_seconds: int = Field(30, ge=1)
    """The long poll of `getUpdates` (its `timeout`)."""
    poll_grace_seconds: float = Field(15.0, gt=0)
    """A `getUpdates` not done this long after its long poll is abandoned and asked again."""
    updates_stall_seconds: float = Field(120.0, gt=0)
    """`/healthz` answers 503 when no `getUpdates` completed for this long."""


class ScheduleSettings(Section):
    daily_summary: bool = True
    daily_summary_time: str = "09:00"
    misfire_grace_seconds: int = Field(6 * 3600, ge=1)

    @field_validator("daily_summary_time")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        hours, _, minutes = value.partition(":")
        if not (
            hours.isdigit()
            and minutes.isdigit()
            and 0 <= int(hours) < 24
            and 0 <= int(minutes) < 60
        ):
            raise ValueError("expected HH:MM")
        return value


class JobsSettings(Section):
    """Reminders and scheduled posts (`schedule`, docs/architecture.md, Scheduled jobs)."""

    per_member: int = Field(10, ge=0)
    """Active jobs one member may have (the owner: no cap); 0 turns members' jobs off."""
    per_chat: int = Field(50, ge=0)
    min_repeat_minutes: int = Field(60, ge=0)
    """The shortest repeat a member may set (the owner: any)."""
    max_days_ahead: int = Field(366, ge=1)
    misfire_grace_seconds: int = Field(3600, ge=0)
    """A run the bot missed (it was down) is still sent this late, saying it is late;
    beyond, it is recorded missed and its creator told."""
    late_after_seconds: float = Field(60.0, ge=0)
    """A run sent more than this after its time says it is late."""
    poll_seconds: float = Field(5.0, gt=0)
    """On a database several workers share (PostgreSQL): how often each asks for runs the
    others added. Alone on its store, a worker sleeps until the next run is due (a job set
    through it wakes it), looking at least once a minute."""


class SecuritySettings(Section):
    allowed_chats: list[int] = Field(default_factory=list)
    """Empty: every chat is allowed."""
    private_chats: Literal["allow", "members", "owner", "allow_list"] | None = None
    """Members' private chats: `allow` every one (the allow-list is for groups), `members`
    those of people seen in (or confirmed members of) an allowed group, `owner` only the
    owner's, `allow_list` those whose user id is in `allowed_chats`. Unset: `members` when
    `allowed_chats` is set, `allow` otherwise (`private_chats_in_effect`)."""
    user_messages_per_minute: int = Field(20, ge=0)
    chat_messages_per_minute: int = Field(60, ge=0)

    @property
    def private_chats_in_effect(self) -> Literal["allow", "members", "owner", "allow_list"]:
        """The private-chat policy that applies: the one set, else the default."""
        if self.private_chats is not None:
            return self.private_chats
        return "members" if self.allowed_chats else "allow"


class RetentionSettings(Section):
    """Deleting old records and platform messages; 0 keeps everything (the default)."""

    keep_records_days: int = Field(0, ge=0)
    keep_platform_events_days: int = Field(0, ge=0)


class MediaSettings(Section):
    """Members' files (`[media]`): images shown to the model, documents it reads."""

    max_images_per_turn: int = Field(4, ge=0)
    """Images a turn sends with its current message, the newest first; the rest are named."""
    keep_days: int = Field(7, ge=0)
    """Days a downloaded file stays in `DATA_DIR/media/` (0: no age bound)."""
    max_mb: int = Field(512, ge=1)
    """All cached files together; the oldest go first past it."""
    max_document_mb: int = Field(20, ge=1)
    """The largest file fetched (the Bot API's own download limit is 20 MB)."""
    download_timeout_seconds: float = Field(20.0, gt=0)
    """Each download's deadline: a stalled one is a skipped image or a tool error."""
    document_parse_seconds: float = Field(20.0, gt=0)
    """How long a PDF's text may take to read (a child process under CPU and memory limits);
    a file that takes longer is refused for ten minutes."""


class MemorySettings(Section):
    """Facts the model keeps on purpose (`[memory]`, docs/architecture.md, Memory)."""

    max_tokens: int = Field(400, ge=0)
    """The `[Memory]` block's bound: the newest facts that fit are shown."""
    per_member: int = Field(50, ge=0)
    """Facts about one member in one chat."""
    per_chat: int = Field(100, ge=0)
    """Facts of one chat, about its members and itself."""
    max_fact_chars: int = Field(300, ge=1)


class TranscriptionSettings(Section):
    """Voice and video notes as text (`[transcription]`): an OpenAI-compatible
    `/audio/transcriptions` endpoint (OpenAI, Groq, a local whisper server). Unset
    `base_url`: nothing is transcribed."""

    base_url: str | None = None
    """e.g. `https://api.openai.com/v1`; the request goes to `<base_url>/audio/transcriptions`."""
    api_key_env: str | None = None
    """The environment variable holding the endpoint's key (never written in the file)."""
    model: str = "whisper-1"
    transcribe: Literal["mentions", "all", "off"] = "mentions"
    """`mentions`: the voice notes that start a turn; `all`: every one in a served chat."""
    price_per_minute: float = Field(0.0, ge=0)
    """What a minute of audio costs (in `[ledger] currency`), for the ledger's `cost`."""
    timeout_seconds: float = Field(30.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL, got {value!r}")
        return value.rstrip("/") if value else value


class LedgerSettings(Section):
    """The usage ledger and the per-call traces (`bot.agent.traces`)."""

    keep_requests_days: int = Field(7, ge=0)
    """Days each model call's request and response are kept; 0 keeps none."""
    max_traces_mb: int = Field(256, ge=1)
    """All traces together, compressed; the oldest go first past it."""
    currency: str = Field("USD", pattern=r"^[A-Za-z$€£¥]{1,8}$")
    """The currency every provider profile's `price_*_per_mtok` is given in; costs are shown
    with it (the dashboard, `tgbot usage report`, the daily summary)."""


_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


class McpServer(Section):
    """One MCP server (`[[mcp.servers]]`, docs/architecture.md, Tools from MCP servers):
    started with the bot over stdio (`command`, `args`, `env`, `cwd`) or reached over
    streamable HTTP (`url`, `headers`). Its tools are named `<name>__<tool>`."""

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    """Extra environment of the server process; the values are secrets (never logged)."""
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    """HTTP headers sent with every request (an `Authorization` token…); secrets."""
    scenes: list[Literal["group", "private", "owner"]] = Field(default_factory=list)
    """Scenes whose chats are offered (and may run) the server's tools."""
    chats: list[int] = Field(default_factory=list)
    """Chat ids that may run its tools (their scenes are offered them); with `scenes`
    empty too: the owner's private chat only."""
    members: Literal["anyone", "admins", "owner"] = "owner"
    """Who may have the bot run its tools: the owner only (the default: a server's powers are
    the operator's), chat administrators and the owner, or anyone in an allowed chat."""
    allow: list[str] = Field(default_factory=list)
    """Tool names (the server's own) offered; empty: all but `deny`."""
    deny: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(30.0, gt=0, le=600)
    message_reference_params: list[str] = Field(default_factory=list)
    """Argument names (exact, top level) that take a message reference: the model writes an
    alias (m12), the server receives the platform message id."""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _SERVER_NAME.fullmatch(value) or "__" in value:
            raise ValueError("expected 1-32 characters of A-Z, a-z, 0-9, _ and - (no '__')")
        return value

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL, got {value!r}")
        return value

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command else "http"


class McpSettings(Section):
    """MCP servers whose tools the model may call (the `mcp` extra)."""

    servers: list[McpServer] = Field(default_factory=list)

    @field_validator("servers")
    @classmethod
    def _one_transport_each(cls, value: list[McpServer]) -> list[McpServer]:
        seen: set[str] = set()
        for server in value:
            if (server.command is None) == (server.url is None):
                raise ValueError(f"{server.name}: set either command (stdio) or url (HTTP)")
            if server.command is None and (server.args or server.env or server.cwd):
                raise ValueError(f"{server.name}: args, env and cwd need a command")
            if server.url is None and server.headers:
                raise ValueError(f"{server.name}: headers need a url")
            if server.name in seen:
                raise ValueError(f"{server.name}: two servers with one name")
            seen.add(server.name)
        return value


class ChatLimitSettings(Section):
    """A scene's or one chat's daily limits (`[limits.group]`, `[limits.chats."<chat id>"]`);
    unset: the shared value; 0: no limit there."""

    chat_daily_cost: float | None = Field(None, ge=0)
    chat_daily_tokens: int | None = Field(None, ge=0)
    member_daily_cost: float | None = Field(None, ge=0)
    member_daily_tokens: int | None = Field(None, ge=0)


class LimitSettings(Section):
    """Spend limits (README, Spend limits): costs in `[ledger] currency`, tokens
    billable-equivalent (for routes without prices); days and months in BOT_TIMEZONE; 0 (the
    default) is no limit."""

    daily_cost: float = Field(0.0, ge=0)
    monthly_cost: float = Field(0.0, ge=0)
    chat_daily_cost: float = Field(0.0, ge=0)
    member_daily_cost: float = Field(0.0, ge=0)
    daily_tokens: int = Field(0, ge=0)
    monthly_tokens: int = Field(0, ge=0)
    chat_daily_tokens: int = Field(0, ge=0)
    member_daily_tokens: int = Field(0, ge=0)
    owner_exempt: bool = True
    """The owner's own turns are counted but never refused."""
    group: ChatLimitSettings = ChatLimitSettings()
    private: ChatLimitSettings = ChatLimitSettings()
    owner: ChatLimitSettings = ChatLimitSettings()
    chats: dict[str, ChatLimitSettings] = Field(default_factory=dict)
    """Per chat id (`[limits.chats."-1001234"]`), over the scene's."""

    @field_validator("chats")
    @classmethod
    def _chat_ids(cls, value: dict[str, ChatLimitSettings]) -> dict[str, ChatLimitSettings]:
        for key in value:
            try:
                int(key)
            except ValueError:
                raise ValueError(f"chats.{key}: expected a chat id (an integer)") from None
        return value


# ------------------------------------------------------------------ per chat (docs/groups.md)


class ChatTriggerSettings(Section):
    """`[chats."<id>".triggers]`: each key unset takes the chat's (or `[triggers]`') value."""

    answer_on_mention: bool | None = None
    answer_on_reply: bool | None = None
    answer_on_command: bool | None = None
    keywords: list[str] | None = None
    patterns: list[str] | None = None
    ambient: Literal["off", "judge"] | None = None
    ambient_route: str | None = None
    ambient_cooldown_seconds: int | None = Field(None, ge=0)
    ambient_daily_max: int | None = Field(None, ge=0)
    answer_bots: bool | None = None


class ChatToolSettings(Section):
    """`[chats."<id>".tools]`: tool names offered (empty: all) and refused."""

    allow: list[str] | None = None
    deny: list[str] | None = None


class TopicSettings(Section):
    """`[chats."<id>".topics."<thread id>"]`: a forum topic's settings over its chat's."""

    persona_file: Path | None = None
    """Text put after the rules file at the end of the system prompt (a prefix of its own)."""
    route: str | None = None
    timezone: str | None = None
    locale: Literal["zh", "en"] | None = None
    enabled: bool | None = None
    """false: the bot stores what is said here and answers nothing."""
    tools: ChatToolSettings = ChatToolSettings()
    triggers: ChatTriggerSettings = ChatTriggerSettings()

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class ChatSettings(TopicSettings):
    """`[chats."<chat id>"]`: one chat's settings over the bot-wide ones."""

    topics: dict[str, TopicSettings] = Field(default_factory=dict)

    @field_validator("topics")
    @classmethod
    def _thread_ids(cls, value: dict[str, TopicSettings]) -> dict[str, TopicSettings]:
        for key in value:
            if not key.lstrip("-").isdigit():
                raise ValueError(f"topics.{key}: expected a topic's thread id (an integer)")
        return value


class ChatsSettings(Section):
    """`[chats]`: `admin_may` (the setting names group admins may change with `/settings`)
    and, keyed by chat id, each chat's table."""

    model_config = ConfigDict(extra="allow")
    keyed_extra: ClassVar[type[BaseModel]] = ChatSettings
    """Keys that are chat ids hold this (the unknown-key check walks them)."""

    admin_may: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _chats(self) -> ChatsSettings:
        extra = self.__pydantic_extra__ or {}
        for key, value in list(extra.items()):
            if not key.lstrip("-").isdigit():
                raise ValueError(f"chats.{key}: expected a chat id (an integer) or admin_may")
            if not isinstance(value, ChatSettings):
                extra[key] = ChatSettings.model_validate(value)
        return self

    @property
    def by_id(self) -> dict[int, ChatSettings]:
        """Each configured chat's table, by chat id."""
        extra = self.__pydantic_extra__ or {}
        return {int(key): value for key, value in extra.items()}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", env_nested_delimiter="__")

    bot_token: SecretStr | None = None
    telegram_api_base: str = DEFAULT_TELEGRAM_API_BASE
    owner_id: int | None = None
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str = "offline-demo"
    llm_kind: ProviderKind | None = None
    llm_cache: CacheSetting | None = None
    llm_cache_ttl: CacheTTLSetting = "5m"
    llm_reasoning: ReasoningLevel = "auto"
    llm_context_window: int = Field(0, ge=0)
    llm_tokenizer_file: Path | None = None
    llm_tokenizer_pattern: str | None = None
    llm_vision: bool = False
    """The `default` route's model sees images (a profile's `vision`)."""
    database_url: str | None = None
    data_dir: Path = Path("./data")
    bot_timezone: str = "UTC"
    bot_locale: Literal["auto", "zh", "en"] = "auto"
    """`auto`: each member's Telegram language (`language_code`: zh*, else en) per message,
    a group the language of its recent members; `zh` or `en` force one for everyone."""
    bot_username: str | None = None
    workspace_rules_file: Path | None = None
    webhook_url: str | None = None
    """Public URL registered with setWebhook at start (`tgbot run --webhook`); unset: the
    operator registers it."""
    webhook_secret: SecretStr | None = None
    """Checked against `X-Telegram-Bot-Api-Secret-Token` on every webhook request."""
    dashboard_port: int | None = Field(None, ge=1, le=65535)
    """When set, `tgbot run` serves the dashboard on this port too (docs/architecture.md)."""
    dashboard_token: SecretStr | None = None
    """When set, every dashboard page but /healthz needs it; unset: loopback only."""
    dashboard_url: str | None = None
    """Public base URL of the dashboard, for the owner's `/dashboard` link."""
    tgbot_log_level: str = "INFO"
    """The level `tgbot run` logs at (a `logging` level name: DEBUG, INFO, WARNING…)."""

    history: HistorySettings = HistorySettings()
    compaction: CompactionSettings = CompactionSettings()
    runtime: RuntimeSettings = RuntimeSettings()
    providers: dict[str, ProviderProfile] = Field(default_factory=dict)
    default_provider: str | None = None
    triggers: TriggerSettings = TriggerSettings()
    telegram: TelegramSettings = TelegramSettings()
    schedule: ScheduleSettings = ScheduleSettings()
    jobs: JobsSettings = JobsSettings()
    security: SecuritySettings = SecuritySettings()
    retention: RetentionSettings = RetentionSettings()
    ledger: LedgerSettings = LedgerSettings()
    mcp: McpSettings = McpSettings()
    limits: LimitSettings = LimitSettings()
    media: MediaSettings = MediaSettings()
    transcription: TranscriptionSettings = TranscriptionSettings()
    chats: ChatsSettings = ChatsSettings()
    memory: MemorySettings = MemorySettings()

    @field_validator("bot_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown time zone {value!r} (use an IANA name such as Asia/Shanghai)"
            ) from exc
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _telegram_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _WEBHOOK_SECRET.fullmatch(value.get_secret_value()):
            raise ValueError("expected 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return value

    @field_validator("providers")
    @classmethod
    def _provider_urls(cls, value: dict[str, ProviderProfile]) -> dict[str, ProviderProfile]:
        for name, profile in value.items():
            if not profile.base_url.startswith(("http://", "https://")):
                raise ValueError(f"providers.{name}.base_url: expected an http(s) URL")
        return value

    @field_validator("dashboard_token")
    @classmethod
    def _long_dashboard_token(cls, value: SecretStr | None) -> SecretStr | None:
        # an empty token would let `Authorization: Bearer` with nothing after it in, on a
        # dashboard that a token opens to every interface
        if value is not None and len(value.get_secret_value().strip()) < MIN_DASHBOARD_TOKEN_CHARS:
            raise ValueError(
                f"{'empty' if not value.get_secret_value().strip() else 'too short'}: "
                f"at least {MIN_DASHBOARD_TOKEN_CHARS} characters (e.g. `openssl rand -hex 16`), "
                "or unset it to serve the dashboard on loopback only"
            )
        return value

    @field_validator("telegram_api_base", "llm_base_url", "webhook_url", "dashboard_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL, got {value!r}")
        return value.rstrip("/") if value else value

    @property
    def fallback_locale(self) -> Locale:
        """The forced locale, or (with `auto`) the one used where no member's language is
        known yet."""
        return "en" if self.bot_locale == "auto" else self.bot_locale

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.bot_timezone)

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'tgbot.sqlite3').as_posix()}"

    @property
    def traces_dir(self) -> Path:
        return self.data_dir / "agent-traces"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_path = _CONFIG_PATH or os.environ.get("BOT_CONFIG")
        if toml_path:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(toml_path)))
        return tuple(sources)


_CONFIG_PATH: str | None = None


def load_settings(config_path: str | Path | None = None, **overrides: Any) -> Settings:
    """Read the settings once; a bad value raises `ConfigError` naming the setting as the
    operator wrote it: an environment variable by its name (`HISTORY__GROUP_TOKENS`), a TOML
    key by its dotted key and file (`bot.toml: history.group_tokens`). An unknown key at any
    level is refused with a "did you mean"."""
    global _CONFIG_PATH
    path = str(config_path) if config_path else None
    if path is None:
        path = os.environ.get("BOT_CONFIG") or None
    toml: dict[str, Any] = {}
    if path is not None:
        toml = read_toml(Path(path))
        refuse_unknown_keys(Settings, toml, (), lambda loc, hint: toml_error(path, loc, hint))
    refuse_unknown_env(Settings)
    _CONFIG_PATH = path
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise named_error(first["loc"], clean_message(first["msg"]), path, toml) from None
    except ValueError as exc:
        raise source_error(str(exc)) from None
    finally:
        _CONFIG_PATH = None
