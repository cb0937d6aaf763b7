//! Tests of the queue (`lib.rs` and its parts).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::*;
use crate::state::STALE_MIN;

fn queue() -> Queue<&'static str> {
    Queue::new(QueueConfig::default())
}

/// The keys handed out without waiting, settled as successes.
fn drain_now(q: &Queue<&'static str>) -> Vec<&'static str> {
    let mut got = Vec::new();
    while let Some(Some(guard)) = q.try_next() {
        got.push(*guard.key());
    }
    got
}

#[tokio::test]
async fn duplicates_collapse_into_one_hand_out() {
    let q = queue();
    for _ in 0..1000 {
        q.add("a");
        q.add("b");
    }
    assert_eq!(q.len(), 2);
    assert_eq!(drain_now(&q), vec!["a", "b"]);
    assert!(q.is_empty());
}

#[tokio::test]
async fn add_all_collapses_duplicates_like_single_adds() {
    let q = queue();
    q.add("b");
    q.add_all(["a", "b", "a", "c"]);
    assert_eq!(drain_now(&q), vec!["b", "a", "c"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_all_wakes_parked_workers() {
    let q: Queue<u32> = Queue::new(QueueConfig::default());
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.next().await.map(|g| *g.key()) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    q.add_all([1, 2]);
    let mut got = Vec::new();
    for w in workers {
        let key = tokio::time::timeout(Duration::from_secs(5), w).await;
        got.push(key.expect("woken").expect("no panic").expect("a key"));
    }
    got.sort_unstable();
    assert_eq!(got, vec![1, 2]);
}

#[tokio::test]
async fn a_held_key_is_not_handed_out_again_until_it_settles() {
    let q = queue();
    q.add("a");
    let guard = q.next().await.expect("a key");
    q.add("a");
    assert!(
        q.try_next().is_none(),
        "the held key must not be handed out twice"
    );
    drop(guard);
    let again = q.next().await.expect("the re-added key");
    assert_eq!(*again.key(), "a");
}

#[tokio::test]
async fn done_and_next_settles_and_hands_out_in_order() {
    let q = queue();
    q.add("a");
    q.add("b");
    let a = q.next().await.expect("a");
    q.add("a");
    let b = a.done_and_next().await.expect("b");
    assert_eq!(*b.key(), "b");
    let a_again = b.done_and_next().await.expect("a, re-added while held");
    assert_eq!(*a_again.key(), "a");
    q.shutdown();
    assert!(a_again.done_and_next().await.is_none());
    assert_eq!(q.processing(), 0);
    assert_eq!(q.state().live_keys(), 0);
}

#[tokio::test]
async fn done_and_next_waits_when_nothing_is_ready() {
    let q = queue();
    q.add("a");
    let a = q.next().await.expect("a");
    let waiting = tokio::spawn(a.done_and_next());
    tokio::task::yield_now().await;
    q.add("b");
    let b = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    let b = b.expect("woken").expect("no panic").expect("b");
    assert_eq!(*b.key(), "b");
}

#[tokio::test]
async fn a_key_added_while_processing_runs_exactly_once_more() {
    let q = queue();
    q.add("a");
    let guard = q.next().await.expect("a key");
    for _ in 0..10 {
        q.add("a");
    }
    guard.done();
    assert_eq!(drain_now(&q), vec!["a"]);
    assert!(q.is_empty());
    assert_eq!(
        q.state().live_keys(),
        0,
        "settled keys leave no entry behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_is_never_held_by_two_workers() {
    let q: Queue<u32> = Queue::new(QueueConfig::default());
    let held = Arc::new(Mutex::new(HashSet::new()));
    let handled = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for worker in 0..8 {
        let (q, held, handled) = (q.clone(), held.clone(), handled.clone());
        workers.push(tokio::spawn(async move {
            let mut next = q.next().await;
            while let Some(guard) = next {
                let key = *guard.key();
                assert!(held.lock().expect("lock").insert(key), "{key} held twice");
                tokio::task::yield_now().await;
                assert!(held.lock().expect("lock").remove(&key));
                handled.fetch_add(1, Ordering::SeqCst);
                // Half the workers settle and take the next key in one step.
                next = if worker % 2 == 0 {
                    guard.done_and_next().await
                } else {
                    drop(guard);
                    q.next().await
                };
            }
        }));
    }
    for round in 0..20_000u32 {
        q.add(round % 16);
        if round % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        while !(q.is_empty() && q.processing() == 0) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the queue drains");
    q.shutdown();
    for w in workers {
        w.await.expect("worker did not panic");
    }
    let handled = handled.load(Ordering::SeqCst);
    assert!(handled >= 16, "every key ran at least once ({handled})");
    assert!(handled <= 20_000, "no key ran more often than it was added");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_thread_and_two_workers_settle_every_key() {
    let n = 200_000u64;
    let q: Queue<u64> = Queue::new(QueueConfig::default());
    let settled = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..2 {
        let (q, settled) = (q.clone(), settled.clone());
        workers.push(tokio::spawn(async move {
            while let Some(guard) = q.next().await {
                drop(guard);
                settled.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let producer = {
        let q = q.clone();
        std::thread::spawn(move || (0..n).for_each(|k| q.add(k)))
    };
    producer.join().expect("the producer did not panic");
    let all = tokio::time::timeout(Duration::from_secs(60), async {
        while settled.load(Ordering::SeqCst) < n as usize {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(
        all.is_ok(),
        "settled {} of {n}; {:?}; parked {}",
        settled.load(Ordering::SeqCst),
        q,
        q.state().waiters.len()
    );
    q.shutdown();
    for w in workers {
        w.await.expect("worker did not panic");
    }
}

#[tokio::test(start_paused = true)]
async fn add_after_keeps_the_earliest_deadline() {
    let q = queue();
    let start = Instant::now();
    q.add_after("a", Duration::from_secs(10));
    q.add_after("a", Duration::from_secs(3));
    q.add_after("a", Duration::from_secs(7));
    let guard = q.next().await.expect("the delayed key");
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    guard.done();
    let more = tokio::time::timeout(Duration::from_secs(60), q.next()).await;
    assert!(more.is_err(), "one delayed add yields one hand-out");
}

#[tokio::test(start_paused = true)]
async fn add_after_of_a_queued_key_does_not_delay_it() {
    let q = queue();
    q.add("a");
    q.add_after("a", Duration::from_secs(5));
    let start = Instant::now();
    q.next().await.expect("a").done();
    assert_eq!(start.elapsed(), Duration::ZERO);
    // The delayed add still fires: whoever asked for it wants a run at that time.
    q.next().await.expect("a, again").done();
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially_and_success_resets_the_backoff() {
    let q = queue();
    q.add("a");
    let mut waits = Vec::new();
    let mut guard = q.next().await.expect("a");
    for _ in 0..4 {
        let retried = Instant::now();
        assert!(matches!(guard.retry(), Retry::After(_)));
        guard = q.next().await.expect("a retry");
        waits.push(retried.elapsed());
    }
    let ms = Duration::from_millis;
    assert_eq!(waits, vec![ms(5), ms(10), ms(20), ms(40)]);
    assert_eq!(q.failures(&"a"), 4);
    guard.done();
    assert_eq!(q.failures(&"a"), 0);
    q.add("a");
    let retried = Instant::now();
    assert_eq!(q.next().await.expect("a").retry(), Retry::After(ms(5)));
    q.next().await.expect("a retry").done();
    assert_eq!(retried.elapsed(), ms(5));
}

#[tokio::test(start_paused = true)]
async fn the_token_bucket_spaces_retries_of_many_keys() {
    let q: Queue<u32> = Queue::new(QueueConfig::default());
    for k in 0..120 {
        q.add(k);
    }
    let mut delays = Vec::new();
    for _ in 0..120 {
        match q.next().await.expect("a key").retry() {
            Retry::After(d) => delays.push(d),
            other => panic!("unexpected {other:?}"),
        }
    }
    // The first 100 retries fit in the burst and wait only their own 5 ms backoff; the
    // next ones wait for tokens at 10/s.
    assert!(delays[..100].iter().all(|d| *d == Duration::from_millis(5)));
    assert_eq!(delays[100], Duration::from_millis(100));
    assert_eq!(delays[119], Duration::from_secs(2));
    let start = Instant::now();
    for _ in 0..120 {
        q.next().await.expect("a retried key").done();
    }
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_key_out_of_retries_is_quarantined_until_released() {
    let q = Queue::new(QueueConfig::default().max_retries(2));
    q.add("a");
    assert!(matches!(
        q.next().await.expect("a").retry(),
        Retry::After(_)
    ));
    assert!(matches!(
        q.next().await.expect("a").retry(),
        Retry::After(_)
    ));
    assert_eq!(q.next().await.expect("a").retry(), Retry::Quarantined);
    assert!(q.is_quarantined(&"a"));
    q.add("a");
    q.add_after("a", Duration::from_millis(1));
    let more = tokio::time::timeout(Duration::from_secs(3600), q.next()).await;
    assert!(
        more.is_err(),
        "a quarantined key is neither retried nor re-added"
    );
    assert!(q.release(&"a"));
    assert!(!q.release(&"a"), "releasing twice changes nothing");
    let guard = q.next().await.expect("the released key");
    assert_eq!(q.failures(&"a"), 0, "a release starts the retries afresh");
    assert!(matches!(guard.retry(), Retry::After(d) if d == Duration::from_millis(5)));
}

#[tokio::test(start_paused = true)]
async fn a_key_changed_while_failing_its_last_retry_runs_again_instead_of_quarantine() {
    let q = Queue::new(QueueConfig::default().max_retries(0));
    q.add("a");
    let guard = q.next().await.expect("a");
    q.add("a");
    assert_eq!(guard.retry(), Retry::Pending);
    assert!(!q.is_quarantined(&"a"));
    assert_eq!(q.next().await.expect("a again").retry(), Retry::Quarantined);
}

#[tokio::test(start_paused = true)]
async fn retry_after_resets_the_backoff_and_waits_the_given_delay() {
    let q = queue();
    q.add("a");
    let _ = q.next().await.expect("a").retry();
    let guard = q.next().await.expect("a");
    let start = Instant::now();
    guard.retry_after(Duration::from_secs(30));
    assert_eq!(q.failures(&"a"), 0);
    q.next().await.expect("a after 30 s").done();
    assert_eq!(start.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_waits_for_held_keys_and_stops_hand_outs() {
    let q = queue();
    q.add("a");
    q.add("b");
    q.add_after("c", Duration::from_secs(1));
    let guard = q.next().await.expect("a");
    let drained = tokio::spawn({
        let q = q.clone();
        async move { q.shutdown_with_drain().await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!drained.is_finished(), "drain waits for the held key");
    assert!(q.next().await.is_none(), "no hand-outs after shutdown");
    q.add("d");
    assert!(q.is_empty() || q.next().await.is_none());
    assert!(matches!(guard.retry(), Retry::ShutDown));
    tokio::time::timeout(Duration::from_secs(1), drained)
        .await
        .expect("drain ends once the guard settles")
        .expect("drain did not panic");
}

#[tokio::test]
async fn shutdown_wakes_parked_workers() {
    let q = queue();
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.next().await.is_none() }
    });
    tokio::task::yield_now().await;
    q.shutdown();
    let ended = tokio::time::timeout(Duration::from_secs(5), worker).await;
    assert!(ended.expect("woken").expect("no panic"));
}

#[tokio::test]
async fn a_cancelled_next_takes_no_key() {
    let q = queue();
    let waited = tokio::time::timeout(Duration::from_millis(10), q.next()).await;
    assert!(waited.is_err());
    assert_eq!(q.state().waiters.len(), 0);
    q.add("a");
    assert_eq!(drain_now(&q), vec!["a"]);
}

/// A stress test of the slab, the index and the parked-worker list together: a producer
/// thread adds 64 keys at random, 16 workers take them, some cancel their waits, some fail
/// and retry after a tiny backoff. No key is ever held twice at once, and no add is lost:
/// every key's last hand-out started after its last add. At the end every slot is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_workers_lose_no_add_and_never_share_a_key() {
    use rand::{Rng, SeedableRng};
    const KEYS: usize = 64;
    const ADDS: usize = 40_000;
    let q: Queue<String> = Queue::new(
        QueueConfig::default()
            .backoff(ExponentialBackoff::new(
                Duration::from_micros(100),
                Duration::from_millis(1),
            ))
            .token_bucket(TokenBucket::unlimited()),
    );
    let names: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("ns/obj-{i}")).collect());
    // How many adds each key has had (bumped before the add), and what its latest hand-out
    // saw when it started.
    let added: Arc<Vec<AtomicUsize>> = Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let seen: Arc<Vec<AtomicUsize>> = Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let held = Arc::new(Mutex::new(HashSet::new()));
    let mut workers = Vec::new();
    for worker in 0..16u64 {
        let (q, names, added, seen, held) = (
            q.clone(),
            names.clone(),
            added.clone(),
            seen.clone(),
            held.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(worker);
            let index = |key: &str| names.iter().position(|n| n == key).expect("a known key");
            loop {
                // A quarter of the workers give up waiting now and then (a cancelled next).
                let guard = if worker % 4 == 0 {
                    tokio::select! {
                        guard = q.next() => guard,
                        () = tokio::task::yield_now() => continue,
                    }
                } else {
                    q.next().await
                };
                let Some(guard) = guard else { break };
                let i = index(guard.key());
                assert!(held.lock().expect("lock").insert(i), "key {i} held twice");
                seen[i].store(added[i].load(Ordering::SeqCst), Ordering::SeqCst);
                if rng.random_bool(0.3) {
                    tokio::task::yield_now().await;
                }
                assert!(held.lock().expect("lock").remove(&i));
                if rng.random_bool(0.05) {
                    let _ = guard.retry();
                } else {
                    drop(guard);
                }
            }
        }));
    }
    let producer = {
        let (q, names, added) = (q.clone(), names.clone(), added.clone());
        std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b6f7265);
            for _ in 0..ADDS {
                let i = rng.random_range(0..KEYS);
                added[i].fetch_add(1, Ordering::SeqCst);
                q.add(names[i].clone());
            }
        })
    };
    producer.join().expect("the producer did not panic");
    let quiet = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let caught_up = (0..KEYS)
                .all(|i| seen[i].load(Ordering::SeqCst) == added[i].load(Ordering::SeqCst));
            if caught_up && q.is_empty() && q.processing() == 0 && q.state().live_keys() == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    let lagging: Vec<_> = (0..KEYS)
        .filter(|&i| seen[i].load(Ordering::SeqCst) != added[i].load(Ordering::SeqCst))
        .collect();
    assert!(
        quiet.is_ok(),
        "keys whose last add never ran: {lagging:?}; {q:?}"
    );
    {
        let state = q.state();
        assert_eq!(state.free.len(), state.slots.len(), "every slot is free");
        assert!(state.slots.iter().all(|s| s.key.is_none()));
    }
    q.shutdown();
    for w in workers {
        w.await.expect("worker did not panic");
    }
}

#[tokio::test]
async fn stale_index_entries_stay_bounded_and_live_keys_stay_found() {
    let q: Queue<u32> = Queue::new(QueueConfig::default().max_retries(0));
    // Key 0 keeps state (quarantined) while 10 000 other keys come and go.
    q.add(0);
    let guard = q.next().await.expect("key 0");
    assert_eq!(guard.retry(), Retry::Quarantined);
    for key in 1..10_000 {
        q.add(key);
        q.next().await.expect("the key just added").done();
        let state = q.state();
        assert!(
            state.index.len() <= 2 * state.live_keys() + STALE_MIN + 1,
            "{} index entries for {} live keys",
            state.index.len(),
            state.live_keys()
        );
    }
    assert!(
        q.is_quarantined(&0),
        "the live key is still found after rebuilds"
    );
    assert!(!q.is_quarantined(&1));
    q.add(0);
    assert!(q.is_empty(), "a quarantined key ignores adds");
    assert!(q.release(&0));
    assert_eq!(*q.next().await.expect("released").key(), 0);
}

/// Records whether it was woken.
#[derive(Default)]
struct Flag(std::sync::atomic::AtomicBool);

impl std::task::Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_woken_wait_that_is_dropped_passes_the_wake_up_on() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let q = queue();
    let (first, second) = (Arc::new(Flag::default()), Arc::new(Flag::default()));
    let (first_waker, second_waker) = (Waker::from(first.clone()), Waker::from(second.clone()));
    let mut a = Box::pin(q.next());
    let mut b = Box::pin(q.next());
    assert!(
        a.as_mut()
            .poll(&mut Context::from_waker(&first_waker))
            .is_pending()
    );
    assert!(
        b.as_mut()
            .poll(&mut Context::from_waker(&second_waker))
            .is_pending()
    );
    assert_eq!(q.state().waiters.len(), 2);
    // One key wakes one parked worker: the last to park.
    q.add("a");
    assert!(second.0.load(Ordering::SeqCst) && !first.0.load(Ordering::SeqCst));
    // It gives up before taking the key, so the other one is woken and takes it.
    drop(b);
    assert!(first.0.load(Ordering::SeqCst), "the wake-up was passed on");
    match a.as_mut().poll(&mut Context::from_waker(&first_waker)) {
        Poll::Ready(Some(guard)) => assert_eq!(*guard.key(), "a"),
        other => panic!("expected the key, got {}", other.is_pending()),
    }
    assert_eq!(q.state().waiters.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_frees_the_slots_that_only_waited_for_a_deadline() {
    let q = queue();
    q.add_after("later", Duration::from_secs(1));
    q.add("held");
    let held = q.next().await.expect("held");
    q.add_after("held", Duration::from_secs(1));
    assert_eq!(q.state().live_keys(), 2);
    q.shutdown();
    assert_eq!(q.state().live_keys(), 1, "only the held key keeps its slot");
    drop(held);
    assert_eq!(q.state().live_keys(), 0);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(q.next().await.is_none());
}

#[tokio::test]
async fn the_inbox_stays_bounded_while_no_worker_takes_keys() {
    let q: Queue<u32> = Queue::new(QueueConfig::default());
    for round in 0..10_000 {
        q.add(round % 3);
        assert!(
            q.inner.inbox.lock().expect("inbox").len() < crate::state::INBOX_MAX,
            "an add drains a full inbox itself"
        );
    }
    // The 10,000 adds collapsed into three keys, as if each had gone straight in.
    assert_eq!(q.len(), 3);
    assert_eq!(q.state().live_keys(), 3);
    // A batch stays for the workers unless the batch before it is still there.
    let batch = 1_000u32;
    for round in 0..20 {
        q.add_all((0..batch).map(|k| round * batch + k));
        let inbox = q.inner.inbox.lock().expect("inbox").len();
        assert!(
            inbox <= crate::state::INBOX_MAX + batch as usize,
            "{inbox} keys in the inbox"
        );
    }
    // Keys 0, 1 and 2 were queued already.
    assert_eq!(q.len(), 20 * batch as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_racing_a_worker_that_parks_always_wakes_it() {
    // Each round a worker finds the queue empty and parks while another thread adds one key:
    // either the worker sees the key in the inbox after parking, or the add sees the parked
    // worker and wakes it. A lost wake-up would hang a round.
    let q: Queue<u32> = Queue::new(QueueConfig::default());
    for round in 0..2_000 {
        let worker = {
            let q = q.clone();
            tokio::spawn(async move { q.next().await.map(|g| *g.key()) })
        };
        let adder = {
            let q = q.clone();
            std::thread::spawn(move || q.add(round))
        };
        let got = tokio::time::timeout(Duration::from_secs(5), worker).await;
        adder.join().expect("the adder did not panic");
        let got = got.expect("the parked worker was woken").expect("no panic");
        assert_eq!(got, Some(round));
    }
    assert_eq!(q.state().live_keys(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_keys_wait_is_timed_from_the_move_into_the_queue_at_most_a_millisecond_after_its_add() {
    #[derive(Debug, Default)]
    struct Times {
        waited: Mutex<Vec<Duration>>,
        worked: Mutex<Vec<Duration>>,
    }
    impl Metrics for Arc<Times> {
        fn added(&self) {}
        fn handed_out(&self, waited: Option<Duration>) {
            self.waited
                .lock()
                .expect("unpoisoned")
                .push(waited.expect("a queued key's wait is known"));
        }
        fn settled(&self, worked: Duration) {
            self.worked.lock().expect("unpoisoned").push(worked);
        }
        fn retried(&self) {}
        fn dropped(&self, _: usize) {}
    }
    let times = Arc::new(Times::default());
    let q: Queue<u32> = Queue::new(QueueConfig::default().metrics(times.clone()));
    let ms = Duration::from_millis;
    // A parked worker: the add moves its key in at once, so its wait is timed from the add.
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.next().await.expect("a key") }
    });
    tokio::task::yield_now().await;
    q.add(1);
    let held = worker.await.expect("no panic");
    // While that worker is busy, a second key waits in the inbox until the timer moves it
    // in, within a millisecond; its wait counts from there.
    q.add(2);
    tokio::time::sleep(ms(10)).await;
    let next = held.done_and_next().await.expect("the second key");
    assert_eq!(*next.key(), 2);
    tokio::time::sleep(ms(3)).await;
    next.done();
    let waited = times.waited.lock().expect("unpoisoned").clone();
    assert_eq!(waited.len(), 2);
    assert_eq!(waited[0], Duration::ZERO, "handed out as it was added");
    assert!(
        waited[1] <= ms(10) && waited[1] >= ms(10) - state::FLUSH_AFTER * 2,
        "the second key waited 10 ms, of which at most about a millisecond in the inbox: \
         {:?}",
        waited[1]
    );
    // On the paused clock the timer moves it in exactly `FLUSH_AFTER` after the add: the
    // wait is timed from that move, not from the add.
    assert_eq!(waited[1], ms(10) - state::FLUSH_AFTER);
    assert_eq!(
        *times.worked.lock().expect("unpoisoned"),
        vec![ms(10), ms(3)]
    );
}

#[tokio::test(start_paused = true)]
async fn with_metrics_adds_are_counted_within_a_millisecond_and_duplicates_are_not() {
    #[derive(Debug, Default)]
    struct Count(AtomicUsize);
    impl Metrics for Arc<Count> {
        fn added(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn handed_out(&self, _: Option<Duration>) {}
        fn settled(&self, _: Duration) {}
        fn retried(&self) {}
        fn dropped(&self, _: usize) {}
    }
    let count = Arc::new(Count::default());
    let q: Queue<u32> = Queue::new(QueueConfig::default().metrics(count.clone()));
    // A worker holds a key through the whole test, as a long reconcile does: nobody else
    // takes the state's lock, and the adds below (fewer than fill the inbox) wait in it.
    q.add(99);
    let held = q.next().await.expect("a key");
    let counted = || count.0.load(Ordering::SeqCst);
    for k in 0..100 {
        q.add(k % 10);
    }
    tokio::time::sleep(state::FLUSH_AFTER * 2).await;
    assert_eq!(
        counted(),
        11,
        "99, then ten distinct keys; duplicates are not counted"
    );
    // A batch asks for its own flush.
    q.add_all(10..15);
    tokio::time::sleep(state::FLUSH_AFTER * 2).await;
    assert_eq!(counted(), 16, "the five keys of the batch");
    for k in 0..15 {
        q.add(k);
    }
    tokio::time::sleep(state::FLUSH_AFTER * 2).await;
    assert_eq!(counted(), 16, "adds of keys already queued are not counted");
    drop(held);
    assert_eq!(q.len(), 15);
}
