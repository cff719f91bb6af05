"""The search: which candidate becomes the best. driver.py's Reducer is the gate the passes
see and builds the parts below in one order; the judge (judge.py) is the one decision every
candidate passes, the scheduler (scheduler.py) runs candidates on the slots, the loop (loop.py)
repeats the phases to a fixpoint, and stats.py holds what they count (reduction.json's figures).
It sits above passes/ (the loop runs them, the scheduler hands them out) and asks run/ only for
slots; how a failure is found and how the result is verified are not its business."""
