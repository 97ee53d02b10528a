//! The HTTP/2 plumbing of the duplicating stage: a request recorded as it is
//! forwarded, sent again from that record on a stream of its own, and a
//! response relayed to the client or read to its end and dropped.

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::request::Parts;
use http::{HeaderMap, Method, Request, Response, Uri, Version};

/// A request's head, kept to send it again.
pub(super) struct Head {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
}

impl Head {
    pub(super) fn new(parts: Parts) -> Self {
        Self {
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            headers: parts.headers,
        }
    }

    fn request(&self) -> Request<()> {
        let mut request = Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// A request's body and trailers, as the client sent them.
#[derive(Default)]
pub(super) struct Body {
    /// The request ended with its headers.
    ended_with_head: bool,
    chunks: Vec<Bytes>,
    trailers: Option<HeaderMap>,
}

/// Sends `body` on `stream` and ends it (with the trailers, if any).
fn send_body(body: &Body, stream: &mut SendStream<Bytes>) -> Result<(), h2::Error> {
    if body.ended_with_head {
        return Ok(());
    }
    for chunk in &body.chunks {
        stream.send_data(chunk.clone(), false)?;
    }
    match &body.trailers {
        Some(trailers) => stream.send_trailers(trailers.clone()),
        None => stream.send_data(Bytes::new(), true),
    }
}

/// Forwards the client's body to `stream` as it comes, and records it.
pub(super) async fn copy_body(
    mut from: RecvStream,
    mut stream: SendStream<Bytes>,
) -> Result<Body, h2::Error> {
    let mut body = Body {
        ended_with_head: from.is_end_stream(),
        ..Body::default()
    };
    if body.ended_with_head {
        return Ok(body);
    }
    while let Some(chunk) = from.data().await {
        let chunk = chunk?;
        from.flow_control().release_capacity(chunk.len())?;
        stream.send_data(chunk.clone(), false)?;
        body.chunks.push(chunk);
    }
    body.trailers = from.trailers().await?;
    match &body.trailers {
        Some(trailers) => stream.send_trailers(trailers.clone())?,
        None => stream.send_data(Bytes::new(), true)?,
    }
    Ok(body)
}

/// Opens a stream upstream with `head`.
pub(super) async fn open(
    upstream: &SendRequest<Bytes>,
    head: &Head,
    end_of_stream: bool,
) -> Result<(ResponseFuture, SendStream<Bytes>), h2::Error> {
    let mut ready = upstream.clone().ready().await?;
    ready.send_request(head.request(), end_of_stream)
}

/// Sends the recorded request again, on a stream of its own.
pub(super) async fn send_again(
    upstream: &SendRequest<Bytes>,
    head: &Head,
    body: &Body,
) -> Result<ResponseFuture, h2::Error> {
    let (response, mut stream) = open(upstream, head, body.ended_with_head).await?;
    send_body(body, &mut stream)?;
    Ok(response)
}

/// Reads a response to its end (releasing flow control as it goes) and
/// drops it.
pub(super) async fn drain(response: ResponseFuture) -> Result<(), h2::Error> {
    let mut body = response.await?.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
    }
    body.trailers().await.map(|_| ())
}

/// Forwards a response to the client: head, body, trailers.
pub(super) async fn relay(
    response: Response<RecvStream>,
    respond: &mut SendResponse<Bytes>,
) -> Result<(), h2::Error> {
    let (head, mut body) = response.into_parts();
    let ended = body.is_end_stream();
    let mut stream = respond.send_response(Response::from_parts(head, ()), ended)?;
    if ended {
        return Ok(());
    }
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
        stream.send_data(chunk, false)?;
    }
    match body.trailers().await? {
        Some(trailers) => stream.send_trailers(trailers),
        None => stream.send_data(Bytes::new(), true),
    }
}
