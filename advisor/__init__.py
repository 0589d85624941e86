"""advisor: how many GPUs to rent, and on which billing tier, from measured scaling curves.

The importable API (what every CLI command calls):

    from advisor import load_workload, load_calibration
"""

from advisor.calibration_data import Calibration, load_calibration, save_calibration
from advisor.errors import InputError
from advisor.spec import Workload, load_workload

__version__ = "0.1.0"
__all__ = [
    "Calibration", "InputError", "Workload", "__version__", "load_calibration", "load_workload", "save_calibration",
]
