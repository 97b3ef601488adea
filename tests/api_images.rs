//! Container images through the HTTP API (issue 29), against a real
//! server over the demo fleet: a spec with `runtime.image` that only Slurm
//! or Ray could take is refused at submit (422, `unschedulable`) with the
//! reason and what to do; a dry run shows the Slurm and Ray pools ruled out
//! by the `image` filter; where a pool runs images, the spec is accepted.

mod api_support;

use api_support::*;

/// A CPU job in an image, allowed on `providers`.
fn image_spec(name: &str, providers: &[&str]) -> String {
    let providers = providers.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ");
    format!(
        "name = {name:?}\n\n[runtime]\nimage = \"registry.example.com/etl:v7\"\ncommand = [\"python\", \"etl.py\"]\n\n\
         [resources]\ncpu_cores = 2\nmemory_gb = 4\n\n[constraints]\nproviders = [{providers}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_only_slurm_or_ray_could_take_is_refused_at_submit_with_the_reason() {
    let mut api = Api::start().await;
    let app = api.token("app", "submitter", &[], None).await;
    let app = Who::Token(&app);

    // The demo fleet's Slurm cluster and Ray cluster run no images.
    let r = api.submit(app, &image_spec("etl", &["onprem-fra", "ray-iad"]), None).await.expect(422);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "unschedulable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("could ever run \"etl\""), "{message}");
    assert!(message.contains("does not run container images"), "{message}");
    assert!(message.contains("runtime.image needs a pool that runs container images"), "{message}");
    assert!(message.contains("Drop runtime.image"), "{message}");

    // A dry run over the whole fleet: those pools are ruled out by name.
    let plan =
        api.call(app, "POST", "/v1/plan", Body::Toml(image_spec("etl", &["*"]))).await.expect(200).json();
    assert_eq!(plan["fits"], true, "{plan}");
    let text = plan.to_string();
    assert!(text.contains("\"filter\":\"image\""), "no pool ruled out by the image filter: {plan}");
    let candidates = plan["candidates"].as_array().expect("candidates");
    assert!(!candidates.is_empty(), "{plan}");
    for c in candidates {
        let pool = c["pool"].as_str().unwrap_or_default();
        assert!(
            !pool.starts_with("onprem-fra/") && !pool.starts_with("ray-iad/"),
            "{pool} cannot run images"
        );
    }

    // The Kubernetes provider runs images: accepted.
    api.submit(app, &image_spec("etl-k8s", &["k8s-b"]), None).await.expect(201);
    // Nothing was queued for the refused one.
    let page = api.get(Who::Owner, "/v1/workloads").await.expect(200).json();
    assert_eq!(page["workloads"].as_array().unwrap().len(), 1, "{page}");
    api.finish().await;
}
