"""advisor inside other tools' decisions. Each module imports nothing of its tool at import time.

    skypilot  time_estimator(workload_path) -> callable for sky.Task.set_time_estimator
"""
