/**
 * The Kubernetes, Gateway API and prometheus-operator schemas, for checking what `helm
 * template` renders (issue 32 §3). kubeconform is not on npm or Debian; the maintained
 * kubernetes-models packages are, and ship each API's OpenAPI schema compiled into a
 * validator (types, required fields, enums, patterns such as Gateway API's Duration). They
 * do not refuse unknown fields, which the chart's own tests and `helm lint` cover.
 */
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
import { PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';

type Model = new (data: any) => { validate(): void };

const MODELS: Record<string, Model> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'gateway.networking.k8s.io/v1/HTTPRoute': HTTPRoute,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

/** '' when the manifest is valid by its API's schema; else what is wrong (an unknown kind too). */
export function schemaProblems(doc: { apiVersion?: string; kind?: string; metadata?: { name?: string } }): string {
  const key = `${doc.apiVersion}/${doc.kind}`;
  const model = MODELS[key];
  if (!model) return `${key}: no schema known for this kind`;
  try {
    new model(doc).validate();
    return '';
  } catch (err) {
    return `${key} ${doc.metadata?.name}: ${(err as Error).message}`;
  }
}
