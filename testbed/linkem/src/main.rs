//! `linkem <config.json>`: the NFQUEUE backend of the dnscamp link emulator.
//!
//! Run it inside the router network namespace of a link; two iptables rules there send the
//! forwarded packets of each direction to their own NFQUEUE number (see driver.py). One thread
//! per direction receives packet metadata (64 bytes copied), asks the pure model in lib.rs when
//! the packet may leave, and holds the verdict until then: an absolute CLOCK_MONOTONIC timerfd
//! (epoll) wakes the thread shortly before the departure, and the thread busy-polls the last
//! microseconds (adaptive: the measured timer overshoot plus a margin, at most `spin_us`).
//! Drops (loss, queue overflow) get a DROP verdict at once.
//!
//! Stats go to `stats_file` as JSON (write tmp + rename) every second and on SIGTERM/SIGINT.

use linkem::{Direction, DropCause, Histogram, LinkConfig, Outcome, Trace};
use nfq::{Queue, Verdict};
use serde_json::json;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering as AO};
use std::sync::{Arc, Mutex};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, AO::SeqCst);
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Arrival time on the monotonic clock: the kernel's receive timestamp of the packet (wall
/// clock, 1 us resolution) when it is present and plausible, else the time we got it.
fn arrival_ns(msg: &nfq::Message, now: u64) -> (u64, Option<i64>) {
    if let Some(ts) = msg.get_timestamp() {
        if let Ok(d) = ts.duration_since(std::time::UNIX_EPOCH) {
            let age = clock_ns(libc::CLOCK_REALTIME) as i64 - d.as_nanos() as i64;
            // 1 us resolution of the timestamp: allow it to look up to 2 us in the future
            if (-2_000..MAX_INGRESS_AGE_NS).contains(&age) {
                return (now - age.max(0) as u64, Some(age));
            }
        }
    }
    (now, None)
}

/// Target fraction of timer wake-ups that come after the departure time.
const LATE_WAKE_FRACTION: f64 = 0.45;
const ADVANCE_STEP_NS: f64 = 4_000.0;
/// Below this, busy-poll rather than arm the timer.
const MIN_SLEEP_NS: u64 = 20_000;

/// Kernel timestamps older than this are not trusted (clock step, or a sender's own stamp on
/// another clock). Packets can wait in the socket up to the next departure (lazy intake).
const MAX_INGRESS_AGE_NS: i64 = 10_000_000_000;
/// Packets taken in per pass before departures are checked again.
const INTAKE_BATCH: usize = 16;
/// Release a packet early by (at most) this much, to centre on the time the verdict is done.
const MAX_VERDICT_COMPENSATION_NS: u64 = 60_000;

#[derive(Default)]
struct DirStats {
    packets: u64,
    bytes: u64,
    forwarded: u64,
    drops_loss: u64,
    drops_queue: u64,
    lateness: Histogram,
    timer_overshoot: Histogram,
    ingress_delay: Histogram,
    verdict_ns: Histogram,
    wakeups: u64,
    recv_errors: u64,
    verdict_errors: u64,
    held_max: u64,
    kernel_queue_len: u32,
    /// Time spent inside ACCEPT verdict syscalls: the kernel forwards (and often delivers)
    /// the packet there, so this is routing work charged to us, not emulation.
    verdict_busy_ns: u64,
    /// Time spent busy-polling before departures.
    spin_busy_ns: u64,
    realtime: bool,
}

impl DirStats {
    fn to_json(&self) -> serde_json::Value {
        let h = &self.lateness;
        json!({
            "packets": self.packets,
            "bytes": self.bytes,
            "forwarded": self.forwarded,
            "drops_by_cause": {"loss": self.drops_loss, "queue": self.drops_queue},
            "lateness_ns": {
                "count": h.count(), "p50": h.quantile_ns(0.5), "p99": h.quantile_ns(0.99),
                "max": h.max_ns(), "min": h.min_ns(), "mean": h.mean_ns(),
            },
            "ingress_delay_ns": {
                "count": self.ingress_delay.count(),
                "p50": self.ingress_delay.quantile_ns(0.5),
                "p99": self.ingress_delay.quantile_ns(0.99),
            },
            "verdict_ns": {
                "p50": self.verdict_ns.quantile_ns(0.5),
                "p99": self.verdict_ns.quantile_ns(0.99),
            },
            "timer_overshoot_ns": {
                "count": self.timer_overshoot.count(),
                "p50": self.timer_overshoot.quantile_ns(0.5),
                "p99": self.timer_overshoot.quantile_ns(0.99),
            },
            "wakeups": self.wakeups,
            "recv_errors": self.recv_errors,
            "verdict_errors": self.verdict_errors,
            "held_max": self.held_max,
            "verdict_busy_ns": self.verdict_busy_ns,
            "spin_busy_ns": self.spin_busy_ns,
            "sched_fifo": self.realtime,
            "kernel_queue_maxlen": self.kernel_queue_len,
        })
    }
}

struct Held {
    dep: u64,
    seq: u64,
    msg: nfq::Message,
}
impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.dep, self.seq) == (o.dep, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // min-heap on (departure, arrival order)
    fn cmp(&self, o: &Self) -> Ordering {
        (o.dep, o.seq).cmp(&(self.dep, self.seq))
    }
}

fn die(msg: String) -> ! {
    eprintln!("linkem: {msg}");
    std::process::exit(2)
}

/// Open a netfilter queue socket bound to `num`, and find its file descriptor (the nfq crate
/// does not expose it): with one thread running, socket() returns the lowest free descriptor,
/// which we find just before; the descriptor is then checked to be a NETLINK_NETFILTER socket.
fn open_queue(num: u16, maxlen: u32) -> (Queue, RawFd) {
    // The lowest-free-descriptor rule is only ours to rely on with no other thread running:
    // refuse to guess otherwise, on every start, rather than bind a wrong descriptor now and then.
    if let Some(n) = thread_count() {
        if n != 1 {
            die(format!("queue {num} opened with {n} threads running (open every queue before starting a direction)"));
        }
    }
    let probe = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
    if probe < 0 {
        die("cannot open /dev/null".into());
    }
    unsafe { libc::close(probe) };
    let mut q = Queue::open().unwrap_or_else(|e| die(format!("netlink socket: {e}")));
    let fd = probe;
    let mut proto: libc::c_int = 0;
    let mut plen = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let ok = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL, &mut proto as *mut _ as *mut _, &mut plen)
    };
    if ok != 0 || proto != libc::NETLINK_NETFILTER {
        die(format!("could not identify the netlink socket of queue {num}"));
    }
    // A big receive buffer: bursts must not overflow the socket (NETLINK_NO_ENOBUFS is set by
    // Queue::open, so an overflow would not even be reported to us).
    let size: libc::c_int = 64 << 20;
    unsafe {
        if libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size as *const _ as *const _, 4) != 0 {
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &size as *const _ as *const _, 4);
        }
    }
    q.bind(num).unwrap_or_else(|e| die(format!("bind queue {num}: {e} (is another process bound?)")));
    q.set_copy_range(num, 64).unwrap_or_else(|e| die(format!("copy range: {e}")));
    q.set_queue_max_len(num, maxlen).unwrap_or_else(|e| die(format!("queue max len: {e}")));
    q.set_recv_gso(num, false).unwrap_or_else(|e| die(format!("gso: {e}")));
    // fail closed: if we cannot keep up, the kernel drops rather than bypassing the emulator
    q.set_fail_open(num, false).unwrap_or_else(|e| die(format!("fail open: {e}")));
    q.set_nonblocking(true);
    (q, fd)
}

/// The number of threads of this process, from /proc/self/status (None where it cannot be read).
fn thread_count() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok())
}

struct Epoll {
    ep: RawFd,
    tfd: RawFd,
}

impl Epoll {
    fn new(sock: RawFd, _with_sock: bool) -> Epoll {
        let tfd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if tfd < 0 {
            die("timerfd".into());
        }
        Epoll::build(&[(sock, 1u64), (tfd, 2u64)], tfd)
    }

    /// A second epoll set that watches only the timer of `other`.
    fn with_timer_of(other: &Epoll) -> Epoll {
        Epoll::build(&[(other.tfd, 2u64)], other.tfd)
    }

    fn build(fds: &[(RawFd, u64)], tfd: RawFd) -> Epoll {
        unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            if ep < 0 {
                die("epoll".into());
            }
            for &(fd, tag) in fds {
                let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: tag };
                if libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) != 0 {
                    die("epoll_ctl".into());
                }
            }
            Epoll { ep, tfd }
        }
    }

    fn arm_abs(&self, t_ns: u64) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
            },
        };
        unsafe { libc::timerfd_settime(self.tfd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    }

    fn disarm(&self) {
        let spec: libc::itimerspec = unsafe { std::mem::zeroed() };
        unsafe { libc::timerfd_settime(self.tfd, 0, &spec, std::ptr::null_mut()) };
    }

    /// Wait for the socket or the timer; returns (timer fired, socket readable).
    fn wait(&self, timeout_ms: i32) -> (bool, bool) {
        let mut evs: [libc::epoll_event; 4] = unsafe { std::mem::zeroed() };
        let n = unsafe { libc::epoll_wait(self.ep, evs.as_mut_ptr(), 4, timeout_ms) };
        let mut fired = false;
        let mut readable = n < 0; // EINTR: look at the socket anyway
        for ev in evs.iter().take(n.max(0) as usize) {
            if ev.u64 == 1 {
                readable = true;
            }
            if ev.u64 == 2 {
                let mut buf = [0u8; 8];
                unsafe { libc::read(self.tfd, buf.as_mut_ptr() as *mut _, 8) };
                fired = true;
            }
        }
        (fired, readable)
    }
}

fn run_direction(
    mut q: Queue,
    sock: RawFd,
    mut dir: Direction,
    stats: Arc<Mutex<DirStats>>,
    spin_max_ns: u64,
    rt_priority: i32,
) {
    if rt_priority > 0 {
        let param = libc::sched_param { sched_priority: rt_priority };
        let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
        stats.lock().unwrap().realtime = rc == 0;
        if rc != 0 {
            eprintln!("linkem: SCHED_FIFO {rt_priority} refused (error {rc}); normal scheduling");
        }
    }
    let ep = Epoll::new(sock, true);
    // Lazy intake: while packets are held in FIFO mode, a new arrival can never leave before
    // the held head, so the thread sleeps on the timer alone and takes arrivals in when it
    // wakes for a departure (one wake-up per packet instead of two). This needs the kernel's
    // receive timestamps (arrival time must not depend on when we read the packet).
    let ep_timer = Epoll::with_timer_of(&ep);
    let fifo = !dir.config().reorder;
    let mut stamped = false; // the last packet carried a plausible kernel timestamp
    let mut heap: BinaryHeap<Held> = BinaryHeap::new();
    let mut seq: u64 = 0;
    // How early the timer is armed before a departure. Tracked as a quantile of the timer's
    // overshoot: after each wake-up it grows if the wake-up came too late and shrinks if it
    // came early, so that about LATE_WAKE_FRACTION of wake-ups are late (and slightly late
    // packets), while the others busy-poll only the short rest (cheap on CPU).
    let mut advance_ns: f64 = (spin_max_ns / 2) as f64;
    let mut armed_for: Option<u64> = None;
    // How long handing an ACCEPT verdict to the kernel takes (it forwards the packet inside
    // the syscall): packets are released this much before their departure time.
    let mut verdict_ewma: f64 = 0.0;
    let mut spin_acc: u64 = 0;
    let mut sock_ready = true;
    while !STOP.load(AO::Relaxed) {
        // 1. release everything that is due
        let mut now = mono_ns();
        let comp = (verdict_ewma as u64).min(MAX_VERDICT_COMPENSATION_NS);
        while heap.peek().is_some_and(|h| h.dep <= now + comp) {
            let h = heap.pop().unwrap();
            let mut msg = h.msg;
            msg.set_verdict(Verdict::Accept);
            let before = mono_ns();
            let ok = q.verdict(msg).is_ok();
            // honest lateness: the clock read after the verdict has been handed to the kernel
            let after = mono_ns();
            verdict_ewma = 0.9 * verdict_ewma + 0.1 * (after - before) as f64;
            let mut st = stats.lock().unwrap();
            if ok {
                st.forwarded += 1;
                st.lateness.record(after as i64 - h.dep as i64);
                st.verdict_ns.record((after - before) as i64);
                st.verdict_busy_ns += after - before;
            } else {
                st.verdict_errors += 1;
            }
            now = after;
        }
        // 2. take in what arrived, a bounded batch at a time so that departures stay on time
        if sock_ready {
            let mut n = 0;
            while n < INTAKE_BATCH {
                match q.recv() {
                    Ok(mut msg) => {
                        n += 1;
                        let (arr, age) = arrival_ns(&msg, mono_ns());
                        stamped = age.is_some();
                        let len = msg.get_original_len() as u32;
                        let outcome = dir.schedule(arr, len);
                        let mut st = stats.lock().unwrap();
                        if let Some(age) = age {
                            st.ingress_delay.record(age);
                        }
                        st.packets += 1;
                        st.bytes += len as u64;
                        match outcome {
                            Outcome::Drop(cause) => {
                                match cause {
                                    DropCause::Loss => st.drops_loss += 1,
                                    DropCause::Queue => st.drops_queue += 1,
                                }
                                drop(st);
                                msg.set_verdict(Verdict::Drop);
                                if q.verdict(msg).is_err() {
                                    stats.lock().unwrap().verdict_errors += 1;
                                }
                            }
                            Outcome::Departure(dep) => {
                                seq += 1;
                                heap.push(Held { dep, seq, msg });
                                st.held_max = st.held_max.max(heap.len() as u64);
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        if e.kind() != std::io::ErrorKind::WouldBlock {
                            stats.lock().unwrap().recv_errors += 1;
                        }
                        sock_ready = false;
                        break;
                    }
                }
            }
            if n > 0 {
                continue; // re-check departures before taking in more
            }
        }
        // 3. wait: busy-poll when the next departure is close, else sleep on the timer
        now = mono_ns();
        match heap.peek().map(|h| h.dep) {
            None => {
                if armed_for.take().is_some() {
                    ep.disarm();
                }
                sock_ready = ep.wait(100).1;
            }
            Some(dep) => {
                let comp = (verdict_ewma as u64).min(MAX_VERDICT_COMPENSATION_NS);
                let dep = dep.saturating_sub(comp);
                if dep.saturating_sub(now) <= (advance_ns as u64).max(MIN_SLEEP_NS) {
                    // arrivals meanwhile keep their kernel timestamps; without them, keep
                    // taking them in while polling
                    if !(fifo && stamped) {
                        sock_ready = true;
                    }
                    std::hint::spin_loop();
                    spin_acc += mono_ns() - now;
                    if spin_acc > 1_000_000 {
                        stats.lock().unwrap().spin_busy_ns += spin_acc;
                        spin_acc = 0;
                    }
                    continue;
                }
                let target = dep - advance_ns as u64;
                if armed_for != Some(target) {
                    ep.arm_abs(target);
                    armed_for = Some(target);
                }
                let lazy = fifo && stamped;
                let (fired, readable) = if lazy { ep_timer.wait(100) } else { ep.wait(100) };
                // lazily: look at the socket at every wake-up (it costs one recv)
                sock_ready = readable || lazy;
                if fired {
                    let woke = mono_ns();
                    armed_for = None;
                    let over = woke.saturating_sub(target);
                    if woke > dep {
                        advance_ns += ADVANCE_STEP_NS * (1.0 - LATE_WAKE_FRACTION);
                    } else {
                        advance_ns -= ADVANCE_STEP_NS * LATE_WAKE_FRACTION;
                    }
                    advance_ns = advance_ns.clamp(0.0, spin_max_ns as f64);
                    let mut st = stats.lock().unwrap();
                    st.timer_overshoot.record(over as i64);
                    st.wakeups += 1;
                }
            }
        }
    }
    // On exit the kernel drops what is still held when the socket closes (fail closed).
}

/// (device, inode) of a namespace file.
fn ns_id(path: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn write_atomic(path: &str, text: &str) {
    let tmp = format!("{path}.tmp.{}", std::process::id());
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 || args[1] == "--help" || args[1] == "-h" {
        eprintln!("usage: linkem <config.json>   (run inside the router namespace; see README.md)");
        std::process::exit(if args.len() == 2 { 0 } else { 2 });
    }
    let text = std::fs::read_to_string(&args[1]).unwrap_or_else(|e| die(format!("{}: {e}", args[1])));
    let cfg = LinkConfig::from_json(&text).unwrap_or_else(|e| die(e.to_string()));
    let load_trace = |c: &linkem::DirectionConfig| -> Option<Trace> {
        c.trace_file.as_ref().map(|p| {
            let t = std::fs::read_to_string(p).unwrap_or_else(|e| die(format!("{p}: {e}")));
            Trace::parse(&t).unwrap_or_else(|e| die(format!("{p}: {e}")))
        })
    };
    let d_ab = Direction::new(&cfg.a_to_b, load_trace(&cfg.a_to_b)).unwrap_or_else(|e| die(format!("a_to_b: {e}")));
    let d_ba = Direction::new(&cfg.b_to_a, load_trace(&cfg.b_to_a)).unwrap_or_else(|e| die(format!("b_to_a: {e}")));

    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        // timerfd expiries are otherwise rounded up by the default 50 us timer slack
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }

    // Any socket asking for SO_TIMESTAMP makes the kernel stamp every received packet, and
    // NFQUEUE passes the stamp on: arrival times then exclude our own wake-up delay.
    let ts_sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if ts_sock >= 0 {
        let one: libc::c_int = 1;
        unsafe { libc::setsockopt(ts_sock, libc::SOL_SOCKET, libc::SO_TIMESTAMP, &one as *const _ as *const _, 4) };
    }

    let spin_ns = cfg.spin_us * 1000;
    let rt_prio = cfg.rt_priority;
    let mut stats = Vec::new();
    let mut threads = Vec::new();
    // Both queues are opened before any direction thread starts: open_queue finds the socket's
    // descriptor as the lowest free one, which holds only while no other thread opens files (a
    // running direction opens its timerfd and epoll set, and once took the second queue's slot).
    let opened: Vec<_> = [("a_to_b", cfg.queues.a_to_b, d_ab), ("b_to_a", cfg.queues.b_to_a, d_ba)]
        .into_iter()
        .map(|(label, num, d)| {
            let maxlen = d.kernel_queue_len();
            let (q, fd) = open_queue(num, maxlen);
            (label, maxlen, q, fd, d)
        })
        .collect();
    for (label, maxlen, q, fd, d) in opened {
        let st = Arc::new(Mutex::new(DirStats { kernel_queue_len: maxlen, ..Default::default() }));
        stats.push((label, st.clone()));
        threads.push(
            std::thread::Builder::new()
                .name(format!("linkem-{label}"))
                .spawn(move || run_direction(q, fd, d, st, spin_ns, rt_prio))
                .unwrap(),
        );
    }

    let started = mono_ns();
    let config_echo = serde_json::to_value(&cfg).unwrap();
    let write_stats = |final_: bool| {
        let mut dirs = serde_json::Map::new();
        for (label, st) in &stats {
            dirs.insert(label.to_string(), st.lock().unwrap().to_json());
        }
        let v = json!({
            "schema": "dnscamp.linkem.stats/1",
            "backend": "nfqueue",
            "name": cfg.name,
            "pid": std::process::id(),
            "uptime_s": (mono_ns() - started) as f64 / 1e9,
            "final": final_,
            "directions": dirs,
            "config": config_echo,
        });
        write_atomic(&cfg.stats_file, &serde_json::to_string_pretty(&v).unwrap());
    };
    write_stats(false);
    if let Some(r) = &cfg.ready_file {
        write_atomic(r, &format!("{}\n", std::process::id()));
    }
    eprintln!("linkem: {} bound to queues {} (a_to_b) and {} (b_to_a)", cfg.name, cfg.queues.a_to_b, cfg.queues.b_to_a);

    let own_ns = ns_id("/proc/self/ns/net");
    let named_ns = cfg.netns.as_ref().map(|n| format!("/run/netns/{n}"));
    if let Some(p) = &named_ns {
        if ns_id(p) != own_ns {
            eprintln!("linkem: warning: {p} is not the namespace linkem runs in; no namespace watchdog");
        }
    }
    let watch_ns = named_ns.filter(|p| ns_id(p) == own_ns && own_ns.is_some());
    let mut last = mono_ns();
    while !STOP.load(AO::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        if threads.iter().any(|t| t.is_finished()) {
            STOP.store(true, AO::SeqCst);
            break;
        }
        if mono_ns() - last >= 1_000_000_000 {
            write_stats(false);
            last = mono_ns();
            if let Some(p) = &watch_ns {
                if ns_id(p) != own_ns {
                    eprintln!("linkem: {p} is gone: the router namespace was deleted; exiting");
                    STOP.store(true, AO::SeqCst);
                }
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
    write_stats(true);
    eprintln!("linkem: {} stopped", cfg.name);
}
