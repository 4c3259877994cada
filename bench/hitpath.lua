-- bench/hitpath.lua: wrk script for bench/hitpath.sh.
--
--   wrk -t2 -c32 -d10s -s bench/hitpath.lua http://127.0.0.1:PORT -- PATHS_FILE
--
-- Each thread reads PATHS_FILE (one request target a line, e.g.
-- "/?SERVICE=WMS&...&BBOX=...", or "/tiles/3/5/2.png"), formats every
-- request once up front, and then cycles through the list; thread i starts
-- at a different place (golden-ratio offsets: wrk runs a thread's init()
-- before the next thread exists, so the thread count is not known there),
-- so the threads do not ask for the same tile at the same moment. There is no response() hook on purpose: with one, wrk
-- copies every body into Lua, which would cost the client CPU that it
-- shares with the server on a small machine. Errors are counted by wrk
-- itself instead: summary.errors.status counts answers with status > 399,
-- and connect/read/write/timeout errors are reported too. done() prints one
-- machine-readable line, "HITPATH key=value ...", that hitpath.sh parses.

local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  table.insert(threads, thread)
end

local reqs = {}
local n = 0
local i = 0

function init(args)
  local file = args[1]
  if file == nil then
    error("hitpath.lua: pass the paths file after --")
  end
  local f = assert(io.open(file, "r"))
  for line in f:lines() do
    if line ~= "" then
      n = n + 1
      reqs[n] = wrk.format("GET", line)
    end
  end
  f:close()
  if n == 0 then
    error("hitpath.lua: no paths in " .. file)
  end
  local frac = ((thread_index or 0) * 0.6180339887) % 1
  i = math.floor(n * frac) % n
end

function request()
  i = i + 1
  if i > n then i = 1 end
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "HITPATH requests=%d duration_us=%d bytes=%d rps=%.1f" ..
    " p50_us=%d p90_us=%d p99_us=%d max_us=%d mean_us=%.1f" ..
    " err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
    summary.requests, summary.duration, summary.bytes,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout))
end
