#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use super::*;

/// An endpoint on `127.0.0.<octet>`, and a client of it sending `token`.
async fn endpoint_and_client(octet: u8, token: &str) -> (HostileEndpoint, kube::Client) {
    let endpoint = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, octet))
        .await
        .unwrap();
    let client = crate::client_for(&endpoint.url(), endpoint.ca_pem(), Some(token)).unwrap();
    (endpoint, client)
}

#[tokio::test]
async fn it_records_the_bearer_a_client_sends_and_answers_like_an_apiserver() {
    let (endpoint, client) = endpoint_and_client(2, "stolen").await;
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.minor, "36");
    let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client)
        .list(&Default::default())
        .await
        .unwrap();
    assert!(namespaces.items.is_empty());
    assert!(endpoint.saw_bearer("stolen"));
    assert!(!endpoint.saw_bearer("other"));
    assert_eq!(endpoint.requests(), 2, "{:?}", endpoint.request_lines());
    assert_eq!(endpoint.allow_endpoint_arg(), "127.0.0.2/32");
}

#[tokio::test]
async fn it_answers_a_token_request_with_the_token_the_test_chose() {
    let (endpoint, client) = endpoint_and_client(3, "current").await;
    let accounts =
        kube::Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client, "ns");
    let request = k8s_openapi::api::authentication::v1::TokenRequest::default();
    assert!(
        accounts
            .create_token_request("sa", &Default::default(), &request)
            .await
            .is_err(),
        "no token chosen yet: 404"
    );
    endpoint.set_minted_token("made-up");
    let answer = accounts
        .create_token_request("sa", &Default::default(), &request)
        .await
        .unwrap();
    assert_eq!(answer.status.unwrap().token.as_deref(), Some("made-up"));
}

#[tokio::test]
async fn it_misbehaves_only_when_told_and_within_its_bounds() {
    let (endpoint, client) = endpoint_and_client(4, "t").await;
    let readyz = || http::Request::get("/readyz").body(Vec::new()).unwrap();
    assert_eq!(client.request_text(readyz()).await.unwrap(), "ok");
    endpoint.misbehave(Misbehaviour::HugeReadyz { bytes: 1 << 20 });
    assert_eq!(client.request_text(readyz()).await.unwrap().len(), 1 << 20);

    endpoint.misbehave(Misbehaviour::EndlessContinue { items: 3, pages: 2 });
    let maps = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::all(client);
    let mut params = kube::api::ListParams::default().limit(1);
    let mut pages = Vec::new();
    loop {
        let page = maps.list(&params).await.unwrap();
        pages.push(page.items.len());
        match page.metadata.continue_ {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
        assert!(pages.len() < 10, "the pages never end");
    }
    assert_eq!(pages, [3, 3, 3], "limit ignored, two continue tokens");
}

#[tokio::test]
async fn it_refuses_to_listen_anywhere_but_loopback_beside_the_apiservers() {
    assert!(HostileEndpoint::start(Ipv4Addr::LOCALHOST).await.is_err());
    assert!(
        HostileEndpoint::start(Ipv4Addr::new(10, 0, 0, 1))
            .await
            .is_err()
    );
}
