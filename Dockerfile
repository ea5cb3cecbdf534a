# The oblivio image: the API, the workers and the CLI (compose.yaml runs all three).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Copy the packages by name, never the whole checkout: a local ./oblivio-data holds
# keyrings and personal data and must not end up in an image layer.
COPY pyproject.toml README.md ./
COPY certificates ./certificates
COPY eventstore ./eventstore
COPY projections ./projections
COPY workers ./workers
COPY oblivio ./oblivio
RUN pip install '.[postgres]'

# Unprivileged, with a data directory for the embedded default (unused on PostgreSQL
# with keys from the environment).
WORKDIR /
RUN rm -rf /src && useradd --system --uid 10001 --create-home --home-dir /data oblivio \
    && install -d -o oblivio -m 0700 /keys
USER oblivio
WORKDIR /data
# The embedded default keeps its keyring apart from the data (its default, under
# $HOME/.config, would be inside /data here): mount another volume on /keys.
ENV OBLIVIO_DATA_DIR=/data \
    OBLIVIO_KEYRING_DIR=/keys

EXPOSE 8000
CMD ["oblivio", "serve", "--host", "0.0.0.0", "--port", "8000"]
