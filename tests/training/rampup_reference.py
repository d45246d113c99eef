"""Megatron's batch-size ramp-up as its train loop drives it: megatron-core 0.15.0's own
RampupBatchsizeNumMicroBatchesCalculator (num_microbatches_calculator.py) and
OptimizerParamScheduler (optimizer_param_scheduler.py), stepped as megatron/training/training.py's
train loop steps them for update_train_iters' number of iterations: update the calculator with the consumed samples, train, step the scheduler
by mbs * dp * num_microbatches, add that to the consumed samples.

rampup_reference.py MBS DP GBS START INCR RAMP_SAMPLES TRAIN_SAMPLES LR MIN_LR WARMUP_SAMPLES DECAY_SAMPLES
prints one line per iteration: ITERATION GLOBAL_BATCH CONSUMED LEARNING_RATE (cosine decay)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from optim_megatron_import import import_megatron_core_module  # noqa: E402

calculators = import_megatron_core_module("num_microbatches_calculator")
OptimizerParamScheduler = import_megatron_core_module("optimizer_param_scheduler").OptimizerParamScheduler


class GroupHolder:
    def __init__(self):
        self.param_groups = [{"lr": 0.0, "weight_decay": 0.0}]


def main(mbs, dp, gbs, start, incr, ramp, train_samples, lr, min_lr, warmup, decay):
    calc = calculators.RampupBatchsizeNumMicroBatchesCalculator(
        global_batch_size=gbs, micro_batch_size=mbs, data_parallel_size=dp,
        decrease_batch_size_if_needed=False, rank=0, start_global_batch_size=start,
        batch_size_increment=incr, ramup_samples=ramp)
    optimizer = GroupHolder()
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=lr, min_lr=min_lr, lr_warmup_steps=warmup, lr_decay_steps=decay,
        lr_decay_style="cosine", start_wd=0.0, end_wd=0.0, wd_incr_steps=decay, wd_incr_style="constant")
    # megatron/training/training.py's update_train_iters: the ramp's iterations, then whole batches.
    train_iters, consumed = 0, 0
    while consumed <= ramp and consumed <= train_samples:
        calc.update(consumed, False)
        consumed += calc.get_current_global_batch_size()
        train_iters += 1
    train_iters += (train_samples - consumed) // gbs
    consumed, iteration = 0, 0
    while iteration < train_iters:
        calc.update(consumed, True)
        batch = mbs * dp * calc.get()
        scheduler.step(increment=batch)
        consumed += batch
        iteration += 1
        print(iteration, batch, consumed, repr(optimizer.param_groups[0]["lr"]))


if __name__ == "__main__":
    values = sys.argv[1:]
    main(*(int(v) for v in values[:7]), float(values[7]), float(values[8]), int(values[9]), int(values[10]))
