__version__ = "0.1.0"

# The library's public API, in chapter order: `from efficient_attention_nb import LAMA`.
# The harness that measures and drives it is reached through its modules, never from here:
#   from efficient_attention_nb.bench import run_benchmarks; from efficient_attention_nb.train import train
from .core import *
from .lama import *
from .linformer import *
from .linear_attention import *
from .transformer import *
from .compositional import *
from .delta_rule import *
from .kernels import *
from .packing import *
from .cpu_kernels import *
