//! Health and reflection: served without credentials.

use idemd::proto;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::harness::*;

async fn health_answers_without_credentials_and_goes_not_serving_on_drain(backend: Backend) {
    let world = World::start(backend).await;
    let mut health = HealthClient::new(world.server.channel().await);
    for service in ["", "idem.v1.IdempotencyService"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health answers")
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "service {service:?}");
    }
    world.server.application.begin_drain().await;
    let status = health
        .check(HealthCheckRequest {
            service: "idem.v1.IdempotencyService".into(),
        })
        .await
        .expect("health answers")
        .into_inner()
        .status;
    assert_eq!(status, ServingStatus::NotServing as i32);
}

async fn reflection_lists_the_api_without_credentials(backend: Backend) {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let world = World::start(backend).await;
    let mut reflection = ServerReflectionClient::new(world.server.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection answers")
        .into_inner();
    let response = responses
        .message()
        .await
        .expect("stream")
        .expect("a response");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("expected a service list");
    };
    let names: Vec<String> = list
        .service
        .into_iter()
        .map(|service| service.name)
        .collect();
    assert!(
        names.contains(&"idem.v1.IdempotencyService".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_owned()),
        "{names:?}"
    );
    let _ = proto::FILE_DESCRIPTOR_SET;
}

store_tests!(
    health_answers_without_credentials_and_goes_not_serving_on_drain,
    reflection_lists_the_api_without_credentials,
);
