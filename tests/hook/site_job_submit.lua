-- A site's own job_submit.lua, as sites have them (the tests' stand-in): GPU jobs without a
-- partition go to "gpu", jobs of the account "bad" are refused with a message, and
-- synergy's rules join in one line at the end.
function slurm_job_submit(job_desc, part_list, submit_uid)
    if job_desc.account == "bad" then
        slurm.log_user("site policy: account 'bad' may not submit")
        return slurm.ERROR
    end
    local gpus = tostring(job_desc.tres_per_job or "") .. tostring(job_desc.tres_per_node or "")
    if (job_desc.partition == nil or job_desc.partition == "") and gpus:match("gpu") then
        job_desc.partition = "gpu"
    end
    return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    return slurm.SUCCESS
end

dofile("@SYNERGY_DIR@/synergy.lua").chain()
return slurm.SUCCESS
