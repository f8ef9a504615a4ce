-- synergy-slurm: job_submit.lua for a site without rules of its own (written by `synergy
-- hook install`). synergy's rules are in synergy.lua beside this file; a site that has its
-- own job_submit.lua adds the dofile line below at its end instead of using this file.
local here = (debug.getinfo(1, "S").source or ""):gsub("^@", ""):match("^(.*)/[^/]*$") or "."
dofile(here .. "/synergy.lua").chain()
return slurm.SUCCESS
