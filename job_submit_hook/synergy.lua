--[[
synergy-slurm's job_submit rules, as a Lua module (job_submit_hook/synergy.lua).

slurmctld runs a site's job_submit.lua (JobSubmitPlugins=lua loads it from the directory
of slurm.conf). This module joins it in one line, at the end of that file:

    dofile("/etc/slurm/synergy.lua").chain("/var/lib/synergy")

chain() wraps the site's slurm_job_submit: the site's rules run first (partition routing,
limits, rejections), and only a job they accept gets synergy's rules, on the partition they
chose. A site without a job_submit.lua of its own gets a two-line one from
`synergy hook install` that does just this.

For GPU jobs in enabled partitions whose user did not opt out, and whose request synergy
reshapes (not_reshaped below: not heterogeneous, --gpus-per-task, --gpus-per-socket or
--gpus over several nodes; arrays are reshaped, all their tasks alike), synergy's rules
  * tag the job: admin_comment gets "synergy.managed=1" (plus ",synergy.profile=KEY" and
    ",synergy.held=1" when they apply; comma-separated, no spaces); users cannot set
    admin_comment, so the tag is ours;
  * when the job's comment carries "synergy:profile=KEY" and the table knows KEY, set its
    cores per GPU and memory per GPU from the table (capped to a node), unless the user gave
    --cpus-per-gpu / --mem-per-gpu / --mem themselves and the site does not allow overriding;
  * hold it (priority 0) when the table asks for it, so that the controller can shape it
    both ways before it is first scheduled (Slurm 22.05 ignores lowering the cores of a job
    it has already scheduled); never a known key the table lists as "no_hold" (its shape
    is within the proportional share: final). Holds only happen while the table is fresh:
    the controller rewrites it every round, so a dead controller means no new holds.
Everything else passes untouched.

Safety: synergy's rules run under pcall; any error of ours, a missing, corrupt or stale
table, or the disable file lets the job through unchanged, with one line in slurmctld's log;
the site's own result is returned as the site's rules gave it. No program is called. Per GPU
submission the module only stats the disable file and the table (LuaFileSystem, Debian's
lua-filesystem) and reads the table only when it was replaced (or changed less than two
seconds before it was last read); without LuaFileSystem it
re-reads the table at most every REFRESH_S seconds. All values from the table are checked.

Files, in the state directory chain() is given ([hook] state_dir, /var/lib/synergy by
default; beside this module when chain() is given none, as in the dev cluster), runtime state
that configuration management and configless Slurm never overwrite:
  synergy-hook.table    written by `synergy hook export` / the controller (atomically);
                        a table of another format version is refused (jobs pass unchanged)
  synergy-hook.disable  if it exists, synergy's rules do nothing (the kill switch)
]]

local M = {}
local REFRESH_S = 5
local NO_VAL = 4294967294
local NO_VAL64 = 18446744073709551614
local KEY_PATTERN = "^[%w_%.:%-]+$"

local function script_dir()
    local src = debug.getinfo(1, "S").source or ""
    src = src:gsub("^@", "")
    return src:match("^(.*)/[^/]*$") or "."
end

local DIR = script_dir()
-- Set by chain(state_dir); beside the module until then.
local TABLE_PATH = DIR .. "/synergy-hook.table"
local DISABLE_PATH = DIR .. "/synergy-hook.disable"

local has_lfs, lfs = pcall(require, "lfs")
if not has_lfs then lfs = nil end

local cache = { data = nil, stamp = nil, checked_at = -1, err = nil, disabled = false }
local logged = {}

local function log_once(msg)
    if not logged[msg] then
        logged[msg] = true
        slurm.log_info("synergy hook: %s", msg)
    end
end

local function file_exists(path)
    if lfs then
        return lfs.attributes(path, "mode") ~= nil
    end
    local f = io.open(path, "r")
    if f then f:close() return true end
    return false
end

local function positive_int(s, max)
    local n = tonumber(s)
    if n == nil or n ~= math.floor(n) or n < 1 then return nil end
    if max ~= nil and n > max then return nil end
    return n
end

-- Parse the table: one "name value..." per line; unknown lines are ignored.
local function parse_table(text)
    local t = { partitions = {}, optout_uid = {}, profiles = {}, n_profiles = 0,
                no_hold = {} }
    for line in text:gmatch("[^\n]+") do
        local name, rest = line:match("^(%S+)%s*(.*)$")
        if name == "version" then t.version = tonumber(rest)
        elseif name == "generated_at" then t.generated_at = tonumber(rest)
        elseif name == "max_age_s" then t.max_age_s = positive_int(rest)
        elseif name == "hold_unknown" then t.hold_unknown = (rest == "1")
        elseif name == "hold_known" then t.hold_known = (rest == "1")
        elseif name == "override_user_shape" then t.override = (rest == "1")
        elseif name == "node_cpus" then t.node_cpus = positive_int(rest, 1048576)
        elseif name == "node_mem_mb" then t.node_mem_mb = positive_int(rest, 1099511627776)
        elseif name == "node_gpus" then t.node_gpus = positive_int(rest, 1024)
        elseif name == "default_partition" then t.default_partition = rest
        elseif name == "partition" then t.partitions[rest] = true
        elseif name == "no_hold" then t.no_hold[rest] = true
        elseif name == "optout_uid" then
            local uid = tonumber(rest)
            if uid then t.optout_uid[uid] = true end
        elseif name == "profile" then
            local key, c, m = rest:match("^(%S+)%s+(%S+)%s+(%S+)$")
            if key and #key <= 64 and key:match(KEY_PATTERN) then
                local ci = positive_int(c, t.node_cpus)
                local mi = positive_int(m, t.node_mem_mb)
                if ci and mi then
                    t.profiles[key] = { cpus = ci, mem = mi }
                    t.n_profiles = t.n_profiles + 1
                else
                    log_once("ignoring profile " .. key .. ": values out of range")
                end
            end
        end
    end
    if t.version ~= 1 or not t.generated_at or not t.max_age_s or not t.node_cpus
        or not t.node_mem_mb or not t.node_gpus then
        return nil, "table incomplete or of another version"
    end
    return t
end

-- The kill switch: a stat per submission with LuaFileSystem, else checked when the table
-- is re-read.
local function disabled_now()
    if lfs then return file_exists(DISABLE_PATH) end
    return cache.disabled
end

-- The table's identity: inode, mtime and size, with its change time (ctime); "none" when it
-- does not exist. Times are whole seconds and a freed inode is soon reused, so a table
-- replaced within the second it was read (or rewritten in place) can carry the stamp read
-- before: a stamp is trusted only once the read came at least two seconds after the file's
-- last change (as git treats "racily clean" files). Until then every submission re-reads it.
local function table_stamp()
    local a = lfs.attributes(TABLE_PATH)
    if not a then return "none", nil end
    return tostring(a.ino) .. ":" .. tostring(a.modification) .. ":" .. tostring(a.size),
        a.change
end

local function load_table(now)
    local stamp, changed = nil, nil
    if lfs then
        stamp, changed = table_stamp()
        if cache.stamp == stamp and (cache.data or cache.err)
            and (changed == nil or cache.checked_at > changed + 1) then
            return cache.data, cache.err
        end
    elseif now - cache.checked_at < REFRESH_S then
        return cache.data, cache.err
    end
    cache.checked_at = now
    cache.stamp = stamp
    cache.disabled = file_exists(DISABLE_PATH)
    local f = io.open(TABLE_PATH, "r")
    if not f then
        cache.data, cache.err = nil, "no table at " .. TABLE_PATH
        return nil, cache.err
    end
    local text = f:read("*a")
    f:close()
    local t, err = parse_table(text or "")
    cache.data, cache.err = t, err
    return t, err
end

-- GPUs requested in a TRES string ("gres:gpu:2", "gres/gpu:a100:2", "gpu:2"); nil if none.
local function gpus_in(tres)
    if tres == nil or tres == "" then return nil end
    local total, found = 0, false
    for item in tostring(tres):gmatch("[^,]+") do
        local body = item:gsub("^gres[:/]", "")
        if body:match("^gpu[:=]") or body:match("^gpu$") then
            local n = body:match("[:=](%d+)$")
            total = total + (tonumber(n) or 1)
            found = true
        end
    end
    if found then return total end
    return nil
end

local function is_set(v)
    return v ~= nil and v ~= "" and v ~= NO_VAL64 and v ~= 0
end

-- A 32-bit job_desc number, nil when unset.
local function set_u32(v)
    local n = tonumber(v)
    if n == nil or n >= NO_VAL then return nil end
    return n
end

-- Why synergy leaves this GPU request as submitted (nil: it reshapes it). The twin of
-- synergy_slurm/vocabulary.py:not_reshaped; the controller applies the same rule, so the
-- hook never holds a job that nothing would release.
-- The twin of synergy_slurm/vocabulary.py's OWN_SHAPE.
local OWN_SHAPE = {
    ["cpus-per-task"] = "-c/--cpus-per-task", ["mem-per-cpu"] = "--mem-per-cpu",
    ["ntasks-per-node"] = "--ntasks-per-node", exclusive = "--exclusive", mem0 = "--mem=0",
}

local function not_reshaped(per_job, per_node, per_task, per_socket, min_nodes, het, resv,
                            own_shape)
    if resv then return "jobs in a reservation are not reshaped" end
    if het then return "heterogeneous job" end
    if per_task then return "--gpus-per-task jobs are not reshaped" end
    if per_socket then return "--gpus-per-socket jobs are not reshaped" end
    if per_job and min_nodes > 1 then return "--gpus over several nodes is not reshaped" end
    if own_shape then
        return (OWN_SHAPE[own_shape] or own_shape)
            .. " sets the job's cores or memory itself: left as submitted"
    end
    if not (per_job or per_node) then return "GPU request synergy cannot reshape" end
    return nil
end

-- A 16-bit job_desc number, nil when unset (NO_VAL16).
local function set_u16(v)
    local n = tonumber(v)
    if n == nil or n >= 65534 then return nil end
    return n
end

-- How the job sets its own cores or memory (vocabulary.GpuRequest's own_shape, a key of
-- OWN_SHAPE): a per-GPU shape would fight it. nil when none.
local function own_shape(job_desc)
    if set_u16(job_desc.cpus_per_task) then return "cpus-per-task" end
    if is_set(job_desc.min_mem_per_cpu) then return "mem-per-cpu" end
    if set_u16(job_desc.ntasks_per_node) then return "ntasks-per-node" end
    local shared = set_u16(job_desc.shared)
    if shared ~= nil and shared ~= 1 then return "exclusive" end
    if tonumber(job_desc.pn_min_memory) == 0 then return "mem0" end
    return nil
end

-- Whether the comment has ``token`` as a whitespace-separated word (vocabulary.has_token).
local function comment_token(comment, token)
    if comment == nil then return false end
    for word in tostring(comment):gmatch("%S+") do
        if word == token then return true end
    end
    return false
end

local function append_admin_comment(job_desc, tags)
    local old = job_desc.admin_comment
    if old ~= nil and old ~= "" then
        job_desc.admin_comment = old .. "," .. tags
    else
        job_desc.admin_comment = tags
    end
end

local function decide_and_apply(job_desc, part_list, submit_uid)
    local per_job = gpus_in(job_desc.tres_per_job)
    local per_node = gpus_in(job_desc.tres_per_node)
    local per_task = gpus_in(job_desc.tres_per_task)
    local per_socket = gpus_in(job_desc.tres_per_socket)
    if not (per_job or per_node or per_task or per_socket) then
        return "not a GPU job"
    end
    local now = os.time()
    local t, err = load_table(now)
    if disabled_now() then
        return "disabled by " .. DISABLE_PATH
    end
    if not t then
        log_once(err)
        return err
    end
    if now - t.generated_at > t.max_age_s then
        log_once("table is stale (controller not running?): passing jobs unchanged")
        return "table stale"
    end
    local partition = job_desc.partition
    if partition == nil or partition == "" then
        partition = t.default_partition
    else
        partition = tostring(partition):match("^[^,]+")
    end
    if partition == nil or not t.partitions[partition] then
        return "partition not managed"
    end
    if t.optout_uid[tonumber(submit_uid) or -1] then return "user opted out" end
    local comment = job_desc.comment
    if comment_token(comment, "synergy:off") then return "job opted out" end
    local own = own_shape(job_desc)
    local refused = not_reshaped(per_job, per_node, per_task, per_socket,
        set_u32(job_desc.min_nodes) or 1, set_u32(job_desc.het_job_offset) ~= nil,
        is_set(job_desc.reservation), own)
    if refused then
        if own and refused:find("left as submitted", 1, true) then
            -- Say so on the job: Slurm's JSON does not show every such option on every
            -- release, and the controller must leave the job as the hook did.
            append_admin_comment(job_desc, "synergy.managed=0,synergy.own=" .. own)
        end
        return "not reshaped: " .. refused
    end

    -- Decide everything first, then change the job in one go.
    local tags = "synergy.managed=1"
    local key = comment ~= nil and tostring(comment):match("synergy:profile=([%w_%.:%-]+)")
        or nil
    if key and #key > 64 then key = nil end
    local prof = key and t.profiles[key] or nil
    local set_cpus, set_mem = nil, nil
    local hold = t.hold_unknown
    if prof then
        tags = tags .. ",synergy.profile=" .. key
        local user_cpus = is_set(job_desc.cpus_per_tres)
        local user_mem = is_set(job_desc.mem_per_tres) or is_set(job_desc.pn_min_memory)
            or is_set(job_desc.min_mem_per_cpu)
        -- GPUs that may land on one node: the per-node count, else the job's, at most a node.
        local on_node = per_node or per_job or per_task or per_socket
        if on_node > t.node_gpus then on_node = t.node_gpus end
        local cpus = math.min(prof.cpus, math.floor(t.node_cpus / on_node))
        local mem = math.min(prof.mem, math.floor(t.node_mem_mb / on_node))
        if (not user_cpus or t.override) and cpus >= 1 then set_cpus = cpus end
        -- A --mem/--mem-per-cpu request cannot be combined with memory per GPU.
        if (not user_mem or t.override) and mem >= 1 and not is_set(job_desc.pn_min_memory)
            and not is_set(job_desc.min_mem_per_cpu) then
            set_mem = mem
        end
        -- A shape within the proportional share is final: holding it only delays it.
        hold = t.hold_known and not t.no_hold[key]
    end
    if hold then tags = tags .. ",synergy.held=1" end

    -- Per-GPU values in the form this Slurm writes GPU requests in: "gres:gpu:N" up to
    -- 22.05, "gres/gpu:N" since 23.02 (which rejects the old form in job_desc).
    local req = job_desc.tres_per_job
    if req == nil or req == "" then req = job_desc.tres_per_node end
    local gpu_tres = "gres:gpu:"
    if tostring(req or ""):match("^gres/") then gpu_tres = "gres/gpu:" end
    if set_cpus then
        job_desc.cpus_per_tres = gpu_tres .. set_cpus
        -- sbatch turns a user's --cpus-per-gpu into the job's minimum cores too (26.05):
        -- left above the new shape, Slurm would refuse the job ("Requested node
        -- configuration is not available"). Lowered to what the shape gives, never raised.
        local gpus = per_job or (per_node * (set_u32(job_desc.min_nodes) or 1))
        local least = set_u32(job_desc.min_cpus)
        if least and gpus and least > set_cpus * gpus then
            job_desc.min_cpus = set_cpus * gpus
        end
    end
    if set_mem then job_desc.mem_per_tres = gpu_tres .. set_mem end
    if hold then job_desc.priority = 0 end
    append_admin_comment(job_desc, tags)
    return "managed"
end

function M.job_submit(job_desc, part_list, submit_uid)
    local ok, res = pcall(decide_and_apply, job_desc, part_list, submit_uid)
    if not ok then
        slurm.log_info("synergy hook: error, job passed unchanged: %s", tostring(res))
    end
    return slurm.SUCCESS
end

-- Updates (the controller's included) pass through untouched.
function M.job_modify(job_desc, job_rec, part_list, modify_uid)
    return slurm.SUCCESS
end

-- Join the site's job_submit.lua: its slurm_job_submit first, then synergy's rules on the
-- jobs it accepts; where it defines none, synergy's alone. A slurm_job_modify of the site
-- is left as it is.
function M.chain(state_dir)
    -- A bad argument must not stop slurmctld loading the site's script: say so and look
    -- for no table there (jobs pass unchanged until it is fixed).
    if state_dir ~= nil and (type(state_dir) ~= "string" or state_dir:sub(1, 1) ~= "/") then
        slurm.log_info("synergy hook: chain(%s): not an absolute directory", tostring(state_dir))
        state_dir = "/nonexistent-synergy-state-dir"
    end
    if state_dir ~= nil then
        TABLE_PATH = state_dir .. "/synergy-hook.table"
        DISABLE_PATH = state_dir .. "/synergy-hook.disable"
        cache.stamp, cache.data, cache.err, cache.checked_at = nil, nil, nil, -1
    end
    local site = slurm_job_submit
    if site == nil then
        slurm_job_submit = M.job_submit
    else
        slurm_job_submit = function(job_desc, part_list, submit_uid)
            local rc = site(job_desc, part_list, submit_uid)
            if rc == slurm.SUCCESS then
                M.job_submit(job_desc, part_list, submit_uid)
            end
            return rc
        end
    end
    if slurm_job_modify == nil then
        slurm_job_modify = M.job_modify
    end
    slurm.log_info("synergy hook loaded (table %s, lfs %s, after the site's rules: %s)",
                   TABLE_PATH, tostring(has_lfs), tostring(site ~= nil))
    return M
end

return M
