use super::*;

fn entity(user: Option<&str>, client: Option<&str>, request: f64) -> QuotaEntity {
    QuotaEntity {
        user: user.map(Into::into),
        client_id: client.map(Into::into),
        request_percentage: Some(request),
        ..Default::default()
    }
}

fn book(entities: Vec<QuotaEntity>) -> QuotaBook {
    QuotaBook::new(&QuotaConfig { entities, ..Default::default() })
}

fn applied(b: &QuotaBook, user: &str, client: &str) -> Option<(f64, (String, String))> {
    b.applied(Kind::Request, Client { user, client_id: client }).map(|a| (a.bound, a.key))
}

fn key(u: &str, c: &str) -> (String, String) {
    (u.into(), c.into())
}

#[test]
fn the_most_specific_quota_applies_in_kafkas_order() {
    let all = [
        entity(Some("alice"), Some("app"), 1.0),
        entity(Some("alice"), Some(DEFAULT_ENTITY), 2.0),
        entity(Some("alice"), None, 3.0),
        entity(Some(DEFAULT_ENTITY), Some("app"), 4.0),
        entity(Some(DEFAULT_ENTITY), Some(DEFAULT_ENTITY), 5.0),
        entity(Some(DEFAULT_ENTITY), None, 6.0),
        entity(None, Some("app"), 7.0),
        entity(None, Some(DEFAULT_ENTITY), 8.0),
    ];
    for skip in 0..all.len() {
        let b = book(all[skip..].to_vec());
        let expected_key = match skip {
            2 | 5 => key("alice", ""),
            6 | 7 => key("", "app"),
            _ => key("alice", "app"),
        };
        assert_eq!(applied(&b, "alice", "app"), Some(((skip + 1) as f64, expected_key)), "from entry {skip}");
    }
}

#[test]
fn without_a_matching_quota_nothing_is_tracked() {
    let mut b = book(vec![entity(Some("bob"), None, 1.0)]);
    let usage = Usage { busy_nanos: Some(1_000_000_000), ..Default::default() };
    assert!(b.charge(Client { user: "alice", client_id: "x" }, usage, 0).is_empty());
    assert_eq!(b.tracked(), 0);
}

#[test]
fn a_user_quota_is_shared_by_all_its_client_ids() {
    let mut b = book(vec![entity(Some("alice"), None, 1.0)]);
    // 1% of a thread over the 10 s minimum span is 100 ms of work.
    let half = Usage { busy_nanos: Some(50_000_000), ..Default::default() };
    assert!(b.charge(Client { user: "alice", client_id: "a" }, half, 0).is_empty());
    assert!(b.charge(Client { user: "alice", client_id: "b" }, half, 0).is_empty());
    let over = b.charge(Client { user: "alice", client_id: "c" }, half, 0);
    assert_eq!(over.len(), 1);
    assert_eq!(b.tracked(), 1);
}

#[test]
fn request_throttle_is_capped_at_one_window_and_byte_throttle_is_not() {
    let mut cfg = QuotaConfig::default();
    cfg.entities.push(QuotaEntity {
        client_id: Some("greedy".into()),
        request_percentage: Some(1.0),
        producer_byte_rate: Some(100.0),
        ..Default::default()
    });
    let mut b = QuotaBook::new(&cfg);
    let c = Client { user: "ANONYMOUS", client_id: "greedy" };
    // 2 s of work against 1% (0.1 s per 10 s): far over; capped at 1 s.
    // 3000 bytes against 100/s over 10 s (1000 bytes): (300-100)/100 * 10 s.
    let usage = Usage { busy_nanos: Some(2_000_000_000), produced_bytes: 3000, fetched_bytes: 0 };
    let got = b.charge(c, usage, 0);
    assert_eq!(got, vec![(Kind::Request, 1000), (Kind::Produce, 20_000)]);
}

#[test]
fn a_client_back_under_its_quota_is_not_throttled() {
    let mut cfg = QuotaConfig::default();
    cfg.entities.push(QuotaEntity {
        client_id: Some(DEFAULT_ENTITY.into()),
        consumer_byte_rate: Some(100.0),
        ..Default::default()
    });
    let mut b = QuotaBook::new(&cfg);
    let c = Client { user: "ANONYMOUS", client_id: "reader" };
    let fetch = |n| Usage { fetched_bytes: n, ..Default::default() };
    assert_eq!(b.charge(c, fetch(2000), 0), vec![(Kind::Fetch, 10_000)]);
    // Eleven windows later the burst no longer counts.
    assert!(b.charge(c, fetch(10), 11_000).is_empty());
}

#[test]
fn sensors_are_bounded_and_expire_when_idle() {
    let mut cfg = QuotaConfig { max_tracked_clients: 3, ..Default::default() };
    cfg.entities.push(entity(None, Some(DEFAULT_ENTITY), 50.0));
    let mut b = QuotaBook::new(&cfg);
    let tiny = Usage { busy_nanos: Some(1), ..Default::default() };
    for (i, id) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        b.charge(Client { user: "u", client_id: id }, tiny, i as u64);
    }
    assert_eq!(b.tracked(), 3);
    assert!(b.sensors.contains_key(&(Kind::Request, String::new(), "e".into())));
    assert!(!b.sensors.contains_key(&(Kind::Request, String::new(), "a".into())));
    b.charge(Client { user: "u", client_id: "z" }, tiny, SENSOR_EXPIRY_MS + 100);
    assert_eq!(b.tracked(), 1);
}

#[test]
fn configuration_mistakes_are_refused() {
    let bad = |e: QuotaEntity| QuotaConfig { entities: vec![e], ..Default::default() }.validate();
    assert!(bad(QuotaEntity { request_percentage: Some(1.0), ..Default::default() }).is_err());
    assert!(bad(entity(None, Some("x"), 0.0)).is_err());
    assert!(bad(entity(None, Some("x"), f64::NAN)).is_err());
    assert!(bad(entity(None, Some("x"), 10.0)).is_ok());
    let twice = QuotaConfig {
        entities: vec![entity(None, Some("x"), 1.0), entity(None, Some("x"), 2.0)],
        ..Default::default()
    };
    assert!(twice.validate().is_err());
}

#[test]
fn the_principal_type_is_not_part_of_the_user_name() {
    let c = Client::new("User:alice", "app");
    assert_eq!((c.user, c.client_id), ("alice", "app"));
}
