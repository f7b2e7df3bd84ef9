# Kafka or Cassandra, run by the launcher's own code (scheduler.services.container) from the jars
# it resolves on Maven Central. scripts/containers.sh assembles the build context:
#   jars/        <state dir>/cache/<server> of the host (lib/*.jar and the resolution stamp)
#   scheduler/   scheduler/__init__.py and scheduler/services/ (standard library only)
# and builds it with --build-arg SERVER=kafka|cassandra and BASE (this default, or a local
# Debian base where no registry is reachable).
ARG BASE=debian:bookworm-slim
FROM ${BASE}

# The same first layer as docker/Dockerfile, so that the engine builds it once for all images.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless python3 python3-venv procps \
    && rm -rf /var/lib/apt/lists/*

ARG SERVER
ENV SCHEDULER_SERVICES_DIR=/var/lib/scheduler-services \
    PYTHONPATH=/opt/scheduler \
    PYTHONDONTWRITEBYTECODE=1 \
    SERVER=${SERVER}
COPY jars /var/lib/scheduler-services/cache/${SERVER}
COPY scheduler /opt/scheduler/scheduler

# Ports: SCHEDULER_SERVICES_KAFKA_PORT / _CONTROLLER_PORT, SCHEDULER_SERVICES_CASSANDRA_PORT /
# _STORAGE_PORT (docs/containers.md); run with --network host, the servers bind 127.0.0.1.
CMD ["sh", "-c", "exec python3 -m scheduler.services.container \"$SERVER\""]
