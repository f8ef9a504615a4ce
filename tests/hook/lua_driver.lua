-- Runs job_submit.lua outside slurmctld with a mock `slurm` table.
-- usage: lua5.1 lua_driver.lua HOOK_DIR CASES_FILE
-- CASES_FILE: one case per line, fields separated by tabs: uid, then key=value pairs for
-- job_desc (numbers for pn_min_memory); or a "!rewrite NAME" line (below). Prints one line
-- per case:
-- cpus_per_tres<TAB>mem_per_tres<TAB>priority<TAB>admin_comment<TAB>rc<TAB>partition<TAB>min_cpus
local hook_dir, cases_file = arg[1], arg[2]
local logs = {}
slurm = {
    SUCCESS = 0, ERROR = -1,
    log_info = function(fmt, ...) logs[#logs + 1] = string.format(fmt, ...) end,
    log_user = function(fmt, ...) end,
}
if os.getenv("SYNERGY_TEST_NO_LFS") == "1" then
    package.preload["lfs"] = function() error("no LuaFileSystem in this test") end
end
dofile(hook_dir .. "/job_submit.lua")
local function run_case(line)
    local fields = {}
    for f in (line .. "\t"):gmatch("([^\t]*)\t") do fields[#fields + 1] = f end
    local uid = tonumber(fields[1])
    local job = {}
    for i = 2, #fields do
        local k, v = fields[i]:match("^([%w_]+)=(.*)$")
        if k then
            if k == "pn_min_memory" or k == "priority" or k == "min_mem_per_cpu"
                or k == "min_nodes" or k == "het_job_offset" or k == "cpus_per_task"
                or k == "ntasks_per_node" or k == "shared" or k == "min_cpus" then
                job[k] = tonumber(v)
            else
                job[k] = v
            end
        end
    end
    if job.explode then
        -- A job_desc whose comment cannot be read: the hook must still let it through.
        setmetatable(job, { __index = function(_, k)
            if k == "comment" then error("boom reading " .. k) end
        end })
        job.explode = nil
    end
    local rc = slurm_job_submit(job, {}, uid)
    local function s(v) if v == nil then return "" end return tostring(v) end
    print(table.concat({s(job.cpus_per_tres), s(job.mem_per_tres), s(job.priority),
                        s(job.admin_comment), s(rc), s(job.partition), s(job.min_cpus)},
                       "\t"))
end

-- "!rewrite NAME": the table is overwritten in place with HOOK_DIR/NAME (same inode),
-- as an editor or `cat >` would; no output line.
for line in io.lines(cases_file) do
    local name = line:match("^!rewrite (.+)$")
    if name then
        local src = assert(io.open(hook_dir .. "/" .. name, "r"))
        local text = src:read("*a")
        src:close()
        local dst = assert(io.open(hook_dir .. "/synergy-hook.table", "w"))
        dst:write(text)
        dst:close()
    else
        run_case(line)
    end
end
io.stderr:write(table.concat(logs, "\n") .. "\n")
