"""The scripts' runtime: Lua 5.1 (what Redis embeds) through lupa, sandboxed as Redis 7.0 does.

One runtime serves every simulated node of the process: a script's function
is compiled once per SHA1 (``Lua.functions``) and run with the calling
node's context (``Lua.run``). What a script sees, as on a real server:

- ``KEYS`` and ``ARGV`` (fresh tables per run); the globals are read-only
  (``Attempt to modify a readonly table``) and a missing one is an error
  (``Script attempted to access nonexistent global variable``);
- ``redis.call`` / ``redis.pcall`` with Redis's conversions both ways
  (:meth:`Lua.call`, :meth:`Lua.reply`), ``redis.error_reply``,
  ``status_reply``, ``sha1hex``, ``log`` (a no-op), ``setresp(2)``,
  ``set_repl``, ``replicate_commands`` and the ``LOG_*``/``REPL_*`` constants;
- the base library, ``string``, ``table``, ``math`` and ``coroutine`` -
  except ``math.random``, ``loadstring``/``load`` and the ``cjson``/``bit``/
  ``struct``/``cmsgpack`` libraries, which the library's scripts do not use:
  they are there, and using one raises :class:`NotModelled` (a replay must
  not depend on C's ``rand()``);
- an error raised in the script, or by ``redis.call``, answered as Redis
  7.0 answers it: ``<message> script: <sha>, on @user_script:<line>.``

The body is compiled as Redis compiles it, inside ``function() ... end``
starting on the first line, under the chunk name ``@user_script``, so line
numbers and compile errors read the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol

import lupa.lua51 as lupa

from .replies import Error, NotModelled, Reply, Status

__all__ = ["Lua", "ScriptHost", "lua"]


class ScriptHost(Protocol):
    """What runs the commands of a script: the node, with the run's database and time."""

    quirks: frozenset[str]

    def script_command(self, args: list[bytes]) -> Reply:
        """One ``redis.call``: run ``args`` inside the current script."""
        ...


# Chunk name '=sim': the error handler skips these frames when it looks
# for the line of the script that failed (Redis's own are C functions).
_BOOT = rb"""
local call, pcall_, sha1, refuse = ...
local getinfo, rawset, setfenv, setmetatable = debug.getinfo, rawset, setfenv, setmetatable
local error, pairs, select, tostring, type = error, pairs, select, tostring, type

local function readonly(source)
    local copy = {}
    for k, v in pairs(source) do copy[k] = v end
    return setmetatable(copy, {__newindex = function()
        error('Attempt to modify a readonly table', 2)
    end})
end

local env = {}
for _, name in pairs({'assert', 'error', 'ipairs', 'next', 'pairs', 'pcall', 'rawequal',
        'rawget', 'rawset', 'select', 'setmetatable', 'getmetatable', 'tonumber',
        'tostring', 'type', 'unpack', 'xpcall', '_VERSION'}) do
    env[name] = _G[name]
end
env._G = env
env.string = readonly(string)
env.table = readonly(table)
local m = {}
for k, v in pairs(math) do m[k] = v end
m.random = function() refuse('math.random') end
m.randomseed = function() refuse('math.randomseed') end
env.math = readonly(m)
env.coroutine = readonly(coroutine)
-- In Redis, not used by the library's scripts: present, and refused when used.
for _, name in pairs({'cjson', 'bit', 'struct', 'cmsgpack'}) do
    env[name] = setmetatable({}, {__index = function(_, k) refuse(name .. '.' .. tostring(k)) end})
end
for _, name in pairs({'loadstring', 'load', 'gcinfo', 'collectgarbage'}) do
    env[name] = function() refuse(name) end
end

local function error_reply(message)
    if type(message) ~= 'string' then
        return {err = 'ERR wrong number or type of arguments'}
    end
    local code, rest = string.match(message, '^%-?(%S+) (.*)$')
    if code == nil then
        return {err = 'ERR ' .. string.gsub(message, '^%-', '')}
    end
    return {err = code .. ' ' .. rest}
end

-- call, pcall and sha1hex are Python functions, C functions to Lua as in
-- Redis: a script's `return redis.call(...)` is then no tail call, and an
-- error raised there still has the script's line beneath it.
local redis = {
    call = call,
    pcall = pcall_,
    sha1hex = sha1,
    error_reply = error_reply,
    status_reply = function(message) return {ok = message} end,
    log = function() end,
    setresp = function(n)
        if n ~= 2 then refuse('redis.setresp(' .. tostring(n) .. ')') end
    end,
    set_repl = function() end,
    replicate_commands = function() return true end,
    breakpoint = function() return false end,
    debug = function() end,
    acl_check_cmd = function() refuse('redis.acl_check_cmd') end,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3,
    REDIS_VERSION = '7.0.15', REDIS_VERSION_NUM = 458767,
}
env.redis = readonly(redis)

setmetatable(env, {
    __index = function(_, name)
        local what = "Script attempted to access nonexistent global variable '"
        error(what .. tostring(name) .. "'", 2)
    end,
    __newindex = function()
        error('Attempt to modify a readonly table', 2)
    end,
})

local function handler(err)
    local level = 2
    local info = getinfo(level, 'Sl')
    while info and (info.what == 'C' or info.source == '=sim') do
        level = level + 1
        info = getinfo(level, 'Sl')
    end
    if type(err) == 'userdata' then
        err = {err = tostring(err)} -- raised by redis.call: the command's error, with its code
    elseif type(err) ~= 'table' then
        err = {err = 'ERR ' .. tostring(err)}
    end
    if info then
        err.source = info.source
        err.line = info.currentline
    end
    return err
end

local function compile(body)
    local chunk, err = loadstring('return function() ' .. body .. '\nend', '@user_script')
    if not chunk then return nil, err end
    setfenv(chunk, env)
    return chunk(), nil
end

local function run(fn, nkeys, ...)
    local all, keys, argv = {...}, {}, {}
    for i = 1, nkeys do keys[i] = all[i] end
    for i = nkeys + 1, select('#', ...) do argv[i - nkeys] = all[i] end
    rawset(env, 'KEYS', keys)
    rawset(env, 'ARGV', argv)
    return xpcall(fn, handler)
end

return compile, run
"""

_NO_ARGUMENTS = Error("ERR Please specify at least one argument for this redis lib call")
_BAD_ARGUMENT = Error("ERR Lua redis lib command arguments must be strings or integers")


class _Raised(Exception):
    """An error reply raised by ``redis.call``: Lua sees its message (the handler in _BOOT)."""


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


class Lua:
    """The process's Lua runtime, its compiled scripts, and the run in progress."""

    def __init__(self) -> None:
        self.runtime = lupa.LuaRuntime(
            encoding=None,
            unpack_returned_tuples=True,
            register_eval=False,
            register_builtins=False,
        )
        boot = self.runtime.globals().loadstring(_BOOT, b"=sim")
        self._compile, self._run = boot(self.call, self.pcall, _sha1hex, self.refuse)
        self._table_from: Callable[..., Any] = self.runtime.table_from
        self.functions: dict[bytes, Any] = {}  # SHA1 -> the compiled function
        self.host: ScriptHost | None = None  # the node running a script now
        self.fatal: BaseException | None = None  # raised inside a redis.call

    def compile(self, sha: bytes, body: bytes) -> Error | None:
        """Compile ``body`` as script ``sha`` (once per process); the error Redis gives, if any."""
        if sha in self.functions:
            return None
        function, error = self._compile(body)
        if function is None:
            message = _decode(error) if isinstance(error, bytes) else str(error)
            return Error(f"ERR Error compiling script (new function): {message}")
        self.functions[sha] = function
        return None

    def run(self, host: ScriptHost, sha: bytes, words: list[bytes], numkeys: int) -> Reply:
        """Run compiled script ``sha`` with ``words`` (keys, then arguments)."""
        outer, self.host = self.host, host
        try:
            out = self._run(self.functions[sha], numkeys, *words)
        finally:
            self.host = outer
        if self.fatal is not None:
            fatal, self.fatal = self.fatal, None
            raise fatal
        ok, result = out if type(out) is tuple else (out, None)  # a script may return nothing
        if ok:
            return self.reply(result, host.quirks)
        return _script_error(result, sha)

    def call(self, *words: object) -> object:
        """``redis.call``: the reply, converted for Lua; an error reply is raised."""
        reply = self._command(words)
        kind = type(reply)
        if kind is int or kind is bytes:  # the usual replies, as _to_lua gives them
            return reply
        if kind is Error:
            raise _Raised(reply)
        return self._to_lua(reply)

    def pcall(self, *words: object) -> object:
        """``redis.pcall``: the reply, converted for Lua; an error reply is {err=...}."""
        reply = self._command(words)
        if type(reply) is Error:
            return self._table_from({b"err": _encode(reply)})
        return self._to_lua(reply)

    def _command(self, words: tuple[object, ...]) -> Reply:
        if not words:
            return _NO_ARGUMENTS
        for word in words:
            if type(word) is not bytes:
                break
        else:  # strings only (the usual): as they are
            host = self.host
            assert host is not None
            try:
                return host.script_command(list(words))  # type: ignore[arg-type]
            except BaseException as exc:  # raised by run() once the script has stopped
                self.fatal = exc
                raise
        args: list[bytes] = []
        for word in words:
            if type(word) is bytes:
                args.append(word)
            elif type(word) is int:  # how lupa hands over a whole number
                args.append(b"%d" % word if -(10**17) < word < 10**17 else b"%.17g" % word)
            elif type(word) is float:
                args.append(b"%.17g" % word)  # as Redis writes a Lua number
            else:
                return _BAD_ARGUMENT
        assert self.host is not None
        try:
            return self.host.script_command(args)
        except BaseException as exc:  # raised by run() once the script has stopped
            self.fatal = exc
            raise

    def refuse(self, what: bytes) -> None:
        """A script used what the sandbox leaves out: the run fails, and ``run`` raises."""
        self.fatal = NotModelled(f"{_decode(what)} in a script")
        raise self.fatal

    def _to_lua(self, reply: Reply) -> object:
        kind = type(reply)
        if kind is int or kind is bytes:
            return reply
        if reply is None:
            return False
        if kind is list:
            return self._table(reply)  # type: ignore[arg-type]
        if kind is Status:
            return self._table_from({b"ok": _encode(reply)})  # type: ignore[arg-type]
        if isinstance(reply, bytes):  # Verbatim: a plain string to a script
            return bytes(reply)
        raise NotModelled(f"a {kind.__name__} reply inside a script")

    def _table(self, items: list[object]) -> object:
        converted = [
            self._table(item) if isinstance(item, list) else False if item is None else item
            for item in items
        ]
        return self._table_from(converted)

    def reply(self, value: object, quirks: frozenset[str] = frozenset()) -> Reply:
        """A script's result as Redis converts it: numbers truncated, true -> 1,
        false -> nil, {err=} / {ok=} -> error / status, tables -> arrays up to
        the first nil."""
        kind = type(value)
        if kind is int or kind is bytes:
            return value  # type: ignore[return-value]
        if kind is float:
            number: float = value  # type: ignore[assignment]
            if -(2.0**63) <= number < 2.0**63:
                return int(number)  # truncated toward zero, as C's (long long) cast
            return -(2**63)  # out of range, inf, nan: what x86's conversion gives Redis
        if value is True:
            return 1
        if value is None or value is False:
            return 0 if value is False and "lua_false_as_zero" in quirks else None
        if lupa.lua_type(value) != "table":
            return None  # a function, userdata...: Redis answers nil
        table: Any = value
        err = table[b"err"]
        if type(err) is bytes:
            return Error(_clean(_decode(err)))
        ok = table[b"ok"]
        if type(ok) is bytes:
            return Status(_decode(ok))
        items: list[object] = []
        i = 1
        while (item := table[i]) is not None:
            items.append(self.reply(item, quirks))
            i += 1
        return items


def _script_error(err: Any, sha: bytes) -> Error:
    """The reply to a run that raised, as Redis 7.0 words it:
    ``<message> script: <sha>, on <source>:<line>.``"""
    if lupa.lua_type(err) != "table" or type(err[b"err"]) is not bytes:
        return Error(f"ERR Error running script {sha.decode()}, execution failure")
    message = _decode(err[b"err"])
    source, line = err[b"source"], err[b"line"]
    if type(source) is bytes and line is not None:
        message += f" script: {sha.decode()}, on {_decode(source)}:{line}."
    return Error(_clean(message))


def _clean(message: str) -> str:
    """As Redis writes an error: no line breaks at the ends, spaces for those inside."""
    return message.strip("\r\n").replace("\r", " ").replace("\n", " ")


def _sha1hex(*args: object) -> bytes:
    """``redis.sha1hex``: one string (a number is written as Lua writes it)."""
    if len(args) != 1 or type(args[0]) not in (bytes, int, float):
        raise _Raised("ERR wrong number of arguments")
    text = args[0]
    if isinstance(text, float):
        text = b"%.14g" % text
    elif isinstance(text, int):
        text = b"%d" % text
    assert isinstance(text, bytes)
    return hashlib.sha1(text).hexdigest().encode()


lua = Lua()
"""The runtime every node of this process shares."""
