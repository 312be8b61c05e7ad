# Source on the GPU machine from the tree's root (.gpu/tree of the carried checkout), after the bundle's setup.sh:
# installs deltamup (editable, offline) and unpacks the carried corpus to /tmp/deltamup/corpus once.
python3 -m pip install --no-deps --no-build-isolation --no-index -q -e . > /tmp/pip-install.log 2>&1 \
  || { cat /tmp/pip-install.log; return 1; }
if [ -f ../corpus.tar.xz ] && [ ! -f /tmp/deltamup/corpus/tokens.bin ]; then
  mkdir -p /tmp/deltamup && tar -C /tmp/deltamup -xJf ../corpus.tar.xz
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
