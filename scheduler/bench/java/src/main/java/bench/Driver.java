package bench;

import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Date;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.quartz.Job;
import org.quartz.JobBuilder;
import org.quartz.JobExecutionContext;
import org.quartz.SimpleScheduleBuilder;
import org.quartz.TriggerBuilder;
import org.quartz.impl.StdSchedulerFactory;

/**
 * The Java side of `scheduler bench peer`: db-scheduler and Quartz on PostgreSQL.
 *
 * <p>Usage: {@code java -cp ... bench.Driver SYSTEM MODE key=value...}; SYSTEM is
 * {@code dbscheduler}, {@code dbscheduler-tuned} or {@code quartz}. Modes:
 *
 * <ul>
 *   <li>{@code suite burst=N steady_s=S levels=0.25,0.5,0.9 backlog=M}: the workloads (a) to (c)
 *       in this process, printing one JSON object.
 *   <li>{@code enqueue n=N}: empty the tables, N tasks due now, then exit (workload d's load).
 *   <li>{@code worker sink=FILE work_ms=MS}: run tasks until killed, appending "id start_ms" per
 *       task to FILE with one write each (nothing buffered for a SIGKILL to lose).
 * </ul>
 */
public final class Driver {
  static final long[] NO_RECORD = new long[0];
  static volatile long[][] records = new long[0][];
  static final AtomicInteger ran = new AtomicInteger();
  static volatile FileOutputStream sink;
  static volatile long workMs;

  /** A task ran: id "n:due_ms". */
  static void record(String id) {
    long start = System.currentTimeMillis();
    if (sink != null) {
      byte[] line = (id + " " + start + "\n").getBytes(StandardCharsets.US_ASCII);
      synchronized (Driver.class) {
        try {
          sink.write(line);
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
      }
    } else {
      int colon = id.indexOf(':');
      int n = Integer.parseInt(id.substring(0, colon));
      long due = Long.parseLong(id.substring(colon + 1));
      long[][] table = records;
      if (n < table.length) {
        table[n] = new long[] {due, start};
      }
      ran.incrementAndGet();
    }
    if (workMs > 0) {
      try {
        Thread.sleep(workMs);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Quartz's job: records its key's name. */
  public static final class NoopJob implements Job {
    @Override
    public void execute(JobExecutionContext context) {
      record(context.getJobDetail().getKey().getName());
    }
  }

  /** One scheduler under test, started. */
  interface Side extends AutoCloseable {
    void schedule(String id, long dueMs) throws Exception;

    @Override
    void close() throws Exception;
  }

  static HikariDataSource dataSource(String jdbc, int size) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbc);
    config.setMaximumPoolSize(size);
    return new HikariDataSource(config);
  }

  static final OneTimeTask<Void> DB_TASK =
      Tasks.oneTime("bench", Void.class).execute((instance, context) -> record(instance.getId()));

  static Side dbScheduler(String jdbc, boolean tuned) {
    HikariDataSource ds = dataSource(jdbc, tuned ? 30 : 20);
    var builder = Scheduler.create(ds, DB_TASK);
    if (tuned) {
      // The README's benchmark configuration ("20 threads, lower 4.0, upper 20.0",
      // lock-and-fetch, its advice above 1,000 executions/s); the polling interval stays 10 s.
      builder = builder.threads(20).pollUsingLockAndFetch(4.0, 20.0);
    }
    Scheduler scheduler = builder.build();
    scheduler.start();
    return new Side() {
      public void schedule(String id, long dueMs) {
        scheduler.schedule(DB_TASK.instance(id), Instant.ofEpochMilli(dueMs));
      }

      public void close() {
        scheduler.stop();
        ds.close();
      }
    };
  }

  static Properties quartzProperties(String jdbc) {
    Properties p = new Properties();
    p.setProperty("org.quartz.scheduler.instanceName", "bench");
    p.setProperty("org.quartz.scheduler.instanceId", "AUTO");
    p.setProperty("org.quartz.threadPool.threadCount", "10");
    p.setProperty("org.quartz.jobStore.class", "org.quartz.impl.jdbcjobstore.JobStoreTX");
    p.setProperty(
        "org.quartz.jobStore.driverDelegateClass",
        "org.quartz.impl.jdbcjobstore.PostgreSQLDelegate");
    p.setProperty("org.quartz.jobStore.isClustered", "true");
    p.setProperty("org.quartz.jobStore.dataSource", "pg");
    p.setProperty("org.quartz.dataSource.pg.driver", "org.postgresql.Driver");
    p.setProperty("org.quartz.dataSource.pg.URL", jdbc);
    p.setProperty("org.quartz.dataSource.pg.user", "bench");
    p.setProperty("org.quartz.dataSource.pg.password", "");
    p.setProperty("org.quartz.dataSource.pg.maxConnections", "14");
    p.setProperty("org.quartz.dataSource.pg.provider", "hikaricp");
    return p;
  }

  static Side quartz(String jdbc) throws Exception {
    org.quartz.Scheduler scheduler = new StdSchedulerFactory(quartzProperties(jdbc)).getScheduler();
    scheduler.start();
    return new Side() {
      public void schedule(String id, long dueMs) throws Exception {
        var job = JobBuilder.newJob(NoopJob.class).withIdentity(id).requestRecovery(true).build();
        var trigger =
            TriggerBuilder.newTrigger()
                .withIdentity(id)
                .startAt(new Date(dueMs))
                .withSchedule(
                    SimpleScheduleBuilder.simpleSchedule().withMisfireHandlingInstructionFireNow())
                .build();
        scheduler.scheduleJob(job, trigger);
      }

      public void close() throws Exception {
        scheduler.shutdown(true);
      }
    };
  }

  static Side open(String system, String jdbc) throws Exception {
    return switch (system) {
      case "dbscheduler" -> dbScheduler(jdbc, false);
      case "dbscheduler-tuned" -> dbScheduler(jdbc, true);
      case "quartz" -> quartz(jdbc);
      default -> throw new IllegalArgumentException(
          "unknown system " + system + ": use dbscheduler, dbscheduler-tuned or quartz");
    };
  }

  /** Creates the system's tables if missing, and empties them. */
  static void reset(String system, String jdbc) throws Exception {
    try (HikariDataSource ds = dataSource(jdbc, 1);
        Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      if (system.startsWith("dbscheduler")) {
        s.execute(
            "create table if not exists scheduled_tasks (task_name text not null, task_instance"
                + " text not null, task_data bytea, execution_time timestamp with time zone not"
                + " null, picked boolean not null, picked_by text, last_success timestamp with"
                + " time zone, last_failure timestamp with time zone, consecutive_failures int,"
                + " last_heartbeat timestamp with time zone, version bigint not null, priority"
                + " smallint, primary key (task_name, task_instance))");
        s.execute(
            "create index if not exists execution_time_idx on scheduled_tasks (execution_time)");
        s.execute(
            "create index if not exists last_heartbeat_idx on scheduled_tasks (last_heartbeat)");
        s.execute("truncate scheduled_tasks");
      } else {
        var exists = s.executeQuery("select to_regclass('qrtz_triggers') is not null");
        exists.next();
        if (!exists.getBoolean(1)) {
          try (InputStream in =
              org.quartz.Scheduler.class.getResourceAsStream(
                  "/org/quartz/impl/jdbcjobstore/tables_postgres.sql")) {
            StringBuilder sql = new StringBuilder();
            for (String line : new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
              String t = line.trim();
              if (!t.startsWith("#") && !t.startsWith("--")) {
                sql.append(line).append('\n');
              }
            }
            for (String statement : sql.toString().split(";")) {
              String t = statement.trim().toLowerCase(Locale.ROOT);
              if (!t.isEmpty() && !t.startsWith("drop") && !t.startsWith("commit")) {
                s.execute(statement);
              }
            }
          }
        }
        for (String table :
            List.of(
                "qrtz_fired_triggers", "qrtz_simple_triggers", "qrtz_cron_triggers",
                "qrtz_simprop_triggers", "qrtz_blob_triggers", "qrtz_triggers",
                "qrtz_job_details", "qrtz_scheduler_state", "qrtz_locks", "qrtz_paused_trigger_grps",
                "qrtz_calendars")) {
          s.execute("delete from " + table);
        }
      }
    }
  }

  /** The JVM's live heap after a collection: what the scheduler holds for its tasks. */
  static long heapBytes() {
    System.gc();
    Runtime rt = Runtime.getRuntime();
    return rt.totalMemory() - rt.freeMemory();
  }

  static double percentile(double[] sorted, double q) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    double rank = (sorted.length - 1) * q / 100;
    int low = (int) Math.floor(rank);
    int high = Math.min(low + 1, sorted.length - 1);
    return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
  }

  static void waitFor(int expected, double timeoutS) throws InterruptedException {
    long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
    while (ran.get() < expected && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
  }

  static Map<String, Object> burst(Side side, int n, double timeoutS) throws Exception {
    records = new long[n][];
    ran.set(0);
    long t0 = System.currentTimeMillis();
    for (int i = 0; i < n; i++) {
      side.schedule(i + ":" + t0, t0);
    }
    long enqueued = System.currentTimeMillis();
    waitFor(n, timeoutS);
    long last = 0;
    int count = 0;
    for (long[] r : records) {
      if (r != null) {
        last = Math.max(last, r[1]);
        count++;
      }
    }
    Map<String, Object> out = new HashMap<>();
    out.put("tasks", n);
    out.put("ran", count);
    out.put("enqueue_per_s", n * 1000.0 / Math.max(1, enqueued - t0));
    out.put("ran_per_s", count * 1000.0 / Math.max(1, last - t0));
    return out;
  }

  static Map<String, Object> steady(Side side, double perS, double seconds, double drainS)
      throws Exception {
    int n = Math.max(1, (int) (perS * seconds));
    records = new long[n][];
    ran.set(0);
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      long at = t0 + (long) (i * 1e9 / perS);
      long wait = at - System.nanoTime();
      if (wait > 0) {
        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
      }
      long due = System.currentTimeMillis() + 1000;
      side.schedule(i + ":" + due, due);
    }
    waitFor(n, drainS);
    List<Double> lags = new ArrayList<>();
    for (long[] r : records) {
      if (r != null) {
        lags.add((double) (r[1] - r[0]));
      }
    }
    double[] sorted = lags.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    Map<String, Object> out = new HashMap<>();
    out.put("offered_per_s", perS);
    out.put("tasks", n);
    out.put("ran", sorted.length);
    out.put("p50_ms", percentile(sorted, 50));
    out.put("p99_ms", percentile(sorted, 99));
    return out;
  }

  static Map<String, Object> backlog(Side side, int n) throws Exception {
    records = new long[0][];
    ran.set(0);
    System.gc();
    long before = heapBytes();
    long t0 = System.currentTimeMillis();
    long hour = 3_600_000L;
    for (int i = 0; i < n; i++) {
      long due = t0 + hour + (long) ((double) i / n * 24 * hour);
      side.schedule(i + ":" + due, due);
    }
    long took = System.currentTimeMillis() - t0;
    System.gc();
    Map<String, Object> out = new HashMap<>();
    out.put("tasks", n);
    out.put("enqueue_per_s", n * 1000.0 / Math.max(1, took));
    out.put("memory_mb", (heapBytes() - before) / 1048576.0);
    out.put("ran_early", ran.get());
    return out;
  }

  static String json(Object value) {
    if (value instanceof Map<?, ?> map) {
      List<String> parts = new ArrayList<>();
      for (var e : map.entrySet()) {
        parts.add("\"" + e.getKey() + "\": " + json(e.getValue()));
      }
      return "{" + String.join(", ", parts) + "}";
    }
    if (value instanceof List<?> list) {
      List<String> parts = new ArrayList<>();
      for (Object o : list) {
        parts.add(json(o));
      }
      return "[" + String.join(", ", parts) + "]";
    }
    if (value instanceof Double d && (d.isNaN() || d.isInfinite())) {
      return "null";
    }
    return String.valueOf(value);
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: Driver SYSTEM MODE key=value...");
      System.exit(2);
    }
    String system = args[0];
    String mode = args[1];
    Map<String, String> opts = new HashMap<>();
    for (String a : Arrays.copyOfRange(args, 2, args.length)) {
      int eq = a.indexOf('=');
      opts.put(a.substring(0, eq), a.substring(eq + 1));
    }
    String jdbc = opts.get("jdbc");
    switch (mode) {
      case "suite" -> {
        reset(system, jdbc);
        int burstN = Integer.parseInt(opts.get("burst"));
        double steadyS = Double.parseDouble(opts.get("steady_s"));
        double drainS = Double.parseDouble(opts.getOrDefault("drain_s", "30"));
        int backlogN = Integer.parseInt(opts.get("backlog"));
        Map<String, Object> out = new HashMap<>();
        try (Side side = open(system, jdbc)) {
          Map<String, Object> b = burst(side, burstN, Double.parseDouble(opts.get("burst_timeout_s")));
          out.put("burst", b);
          double max = (Double) b.get("ran_per_s");
          List<Object> levels = new ArrayList<>();
          for (String level : opts.get("levels").split(",")) {
            levels.add(steady(side, Double.parseDouble(level) * max, steadyS, drainS));
          }
          out.put("steady", levels);
        }
        reset(system, jdbc);
        try (Side side = open(system, jdbc)) {
          out.put("backlog", backlog(side, backlogN));
        }
        System.out.println(json(out));
      }
      case "reset" -> reset(system, jdbc);
      case "enqueue" -> {
        reset(system, jdbc);
        int n = Integer.parseInt(opts.get("n"));
        sink = new FileOutputStream("/dev/null");
        long now = System.currentTimeMillis();
        if (system.equals("quartz")) {
          org.quartz.Scheduler scheduler =
              new StdSchedulerFactory(quartzProperties(jdbc)).getScheduler();
          for (int i = 0; i < n; i++) {
            String id = i + ":" + now;
            scheduler.scheduleJob(
                JobBuilder.newJob(NoopJob.class).withIdentity(id).requestRecovery(true).build(),
                TriggerBuilder.newTrigger().withIdentity(id).startAt(new Date(now)).build());
          }
          scheduler.shutdown(false);
        } else {
          try (HikariDataSource ds = dataSource(jdbc, 2)) {
            var client =
                com.github.kagkarlsson.scheduler.SchedulerClient.Builder.create(ds, DB_TASK).build();
            for (int i = 0; i < n; i++) {
              client.schedule(DB_TASK.instance(i + ":" + now), Instant.ofEpochMilli(now));
            }
          }
        }
        System.out.println("{\"enqueued\": " + n + "}");
      }
      case "worker" -> {
        sink = new FileOutputStream(opts.get("sink"), true);
        workMs = Long.parseLong(opts.getOrDefault("work_ms", "0"));
        Side side = open(system, jdbc);
        System.out.println("{\"started\": true}");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
        side.close();
      }
      default -> {
        System.err.println("unknown mode " + mode + ": use suite, reset, enqueue or worker");
        System.exit(2);
      }
    }
    System.exit(0);
  }
}
