__version__ = "0.1.0"

# Every public name of every chapter, importable from the top level: `from efficient_attention_nb import LAMA`.
# (The functions `linear_attention` and `train` share their names with their modules; import a module's other
# names with `from efficient_attention_nb.linear_attention import ...`.)
from .core import *
from .lama import *
from .linformer import *
from .linear_attention import *
from .transformer import *
from .compositional import *
from .bench import *
from .train import *
